# Debian packages from this build (CPack's DEB generator): `cmake --build BUILD --target
# fabric_debs` writes BUILD/debs/fabric-agent_VERSION_ARCH.deb (the binaries, the systemd unit
# with its sysusers.d and tmpfiles.d entries, /etc/default/fabric-agent and the config as
# conffiles, man pages and completions) and fabric-agent-spank_VERSION_ARCH.deb (the Slurm
# plugin, where libslurm-dev was there to build it). deploy/debian/README.md: how to build,
# install and test them. The build must be configured with -DCMAKE_INSTALL_PREFIX=/usr: the SPANK
# plugin has the binaries' installed paths compiled in.
#
# Install components: `agent` (every install rule of agent/, cni-hook/, systemd/ and the
# fabric_cli_docs pages names it) and `spank` (slurm/spank). A rule without a component lands in
# CMake's "Unspecified", which the check below refuses. Nothing else installs: tests, benchmarks, fuzzers and fabric-mkhost
# have no install rule, so they cannot reach a package. A new component fails here rather than
# silently missing from, or landing in, a package.
get_cmake_property(fabric_install_components COMPONENTS)
list(REMOVE_ITEM fabric_install_components agent spank)
if(fabric_install_components)
  message(FATAL_ERROR "cmake/Packaging.cmake: install components without a package: "
    "${fabric_install_components} (give the install() rule COMPONENT agent or spank)")
endif()

set(FABRIC_PACKAGE_MAINTAINER "fabric-agent maintainers <fabric-agent@example.org>"
  CACHE STRING "Maintainer: field of the Debian packages")
set(deb_src ${PROJECT_SOURCE_DIR}/deploy/debian)
set(deb_out ${PROJECT_BINARY_DIR}/deploy/debian)

# /usr/share/doc/PACKAGE/{copyright,changelog.gz}, which Debian's policy asks of every package.
# One changelog entry for the version being built (a native package: no Debian revision); the
# date is the last commit's, so that the same sources give the same bytes (else configure time).
execute_process(COMMAND git -C ${PROJECT_SOURCE_DIR} log -1 --format=%ct
  OUTPUT_VARIABLE deb_epoch OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(deb_epoch)
  set(ENV{SOURCE_DATE_EPOCH} ${deb_epoch})
endif()
string(TIMESTAMP deb_date "%a, %d %b %Y %H:%M:%S +0000" UTC)
unset(ENV{SOURCE_DATE_EPOCH})
file(MAKE_DIRECTORY ${deb_out})
file(WRITE ${deb_out}/changelog "fabric-agent (${PROJECT_VERSION}) unstable; urgency=medium

  * Built from the fabric-agent source tree by CPack (cmake/Packaging.cmake).

 -- ${FABRIC_PACKAGE_MAINTAINER}  ${deb_date}
")
execute_process(COMMAND gzip -9nf ${deb_out}/changelog RESULT_VARIABLE deb_gzip)
if(NOT deb_gzip EQUAL 0)
  message(FATAL_ERROR "cmake/Packaging.cmake: gzip failed on ${deb_out}/changelog")
endif()
# The package's own files: in the packages (cpack installs by component), not in a plain
# `cmake --install`.
install(FILES ${deb_src}/copyright ${deb_out}/changelog.gz DESTINATION share/doc/fabric-agent
  COMPONENT agent EXCLUDE_FROM_ALL)
# fabric-env and fabric-cni are static on purpose: the tag lintian gives them, overridden.
install(FILES ${deb_src}/fabric-agent.lintian-overrides DESTINATION share/lintian/overrides
  RENAME fabric-agent COMPONENT agent EXCLUDE_FROM_ALL)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME fabric-agent)
set(CPACK_PACKAGE_VENDOR fabric-agent)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${FABRIC_PACKAGE_MAINTAINER}")
# systemd/CMakeLists.txt writes the unit (/lib/systemd/system) and the /etc files by absolute
# path from the install prefix: with DESTDIR they are staged in the package, and the prefix the
# install scripts see is /usr itself, the one the unit names.
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# Stripped, as Debian ships binaries (the build tree keeps the unstripped ones).
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/debs)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL agent)
if(TARGET fabric_spank)
  list(APPEND CPACK_COMPONENTS_ALL spank)
endif()
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # NAME_VERSION_ARCH.deb; Architecture: from dpkg
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://example.org/fabric-agent")
# Depends from the shared libraries the binaries load (dpkg-shlibdeps).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)

set(CPACK_DEBIAN_AGENT_PACKAGE_NAME fabric-agent)
set(CPACK_COMPONENT_AGENT_DESCRIPTION "RDMA fabric agent for GPU clusters
fabric-agent discovers a host's RDMA NICs (InfiniBand and RoCE), ports, GID
tables, SR-IOV functions, GPUs and the PCIe/NUMA topology between them. It
picks the NIC, port and GID index for each GPU of a job and renders the
environment NCCL, RCCL and UCX need, repeats pod address announcements, runs
RDMA bandwidth and latency probes between hosts, and serves all of it over
gRPC, Prometheus metrics, health checks and a CDI spec.
.
This package holds the daemon as a systemd service (enabled at install, never
started by the package), fabricctl, fabric-probe, the static fabric-env and
the chained CNI plugin fabric-cni (/usr/lib/cni).")
# The verbs providers libibverbs loads with dlopen (shlibdeps cannot see them), and rdma-core,
# which loads the kernel modules and orders the unit (After=rdma-hw.target).
set(CPACK_DEBIAN_AGENT_PACKAGE_RECOMMENDS "ibverbs-providers, rdma-core")
set(CPACK_DEBIAN_AGENT_PACKAGE_CONTROL_EXTRA
  ${deb_src}/postinst ${deb_src}/prerm ${deb_src}/postrm ${deb_src}/conffiles)
# Maintainer scripts 0755 and the conffiles list 0644 in the control archive, whatever the
# checkout's modes.
set(CPACK_DEBIAN_AGENT_PACKAGE_CONTROL_STRICT_PERMISSION ON)

if(TARGET fabric_spank)
  install(FILES ${deb_src}/copyright ${deb_out}/changelog.gz
    DESTINATION share/doc/fabric-agent-spank COMPONENT spank EXCLUDE_FROM_ALL)
  install(FILES ${PROJECT_SOURCE_DIR}/slurm/spank/README.md
    DESTINATION share/doc/fabric-agent-spank COMPONENT spank)
  set(CPACK_DEBIAN_SPANK_PACKAGE_NAME fabric-agent-spank)
  set(CPACK_COMPONENT_SPANK_DESCRIPTION "Slurm SPANK plugin of the RDMA fabric agent
The plugin gives each Slurm task the NCCL, RCCL and UCX environment of its
GPUs from the host fabric-agent publishes (srun --fabric-env), through the
fabricctl and fabric-env of the fabric-agent package. Enable it with a line
in /etc/slurm/plugstack.conf (/usr/share/doc/fabric-agent-spank/README.md).")
  # Slurm loads a SPANK plugin only into the Slurm it was built for, and the plugin takes
  # Slurm's symbols from the process that loads it rather than linking libslurm: shlibdeps finds
  # nothing there, so the dependency is the package of the libslurm it was built against
  # (libslurm38 on Debian 12, whose soname changes with Slurm's API).
  set(spank_depends "fabric-agent (= ${PROJECT_VERSION})")
  find_library(FABRIC_LIBSLURM slurm)
  if(FABRIC_LIBSLURM)
    get_filename_component(libslurm_real ${FABRIC_LIBSLURM} REALPATH)
    execute_process(COMMAND dpkg-query -S ${libslurm_real} OUTPUT_VARIABLE libslurm_owner
      ERROR_QUIET)
    string(REGEX MATCH "^[^:,]+" libslurm_pkg "${libslurm_owner}")
    if(libslurm_pkg)
      string(APPEND spank_depends ", ${libslurm_pkg}")
    endif()
  endif()
  set(CPACK_DEBIAN_SPANK_PACKAGE_DEPENDS "${spank_depends}")
  set(CPACK_DEBIAN_SPANK_PACKAGE_SECTION admin)
endif()

include(CPack)

# The debs, from scratch each time (a stale package of a component that is gone would linger).
# CPack's shlibdeps step runs file(1) and dpkg-shlibdeps (dpkg-dev). Where the packages cannot be
# made, the target says why at once, before building anything.
find_program(FABRIC_FILE_PROGRAM file)
find_program(FABRIC_DPKG_SHLIBDEPS dpkg-shlibdeps)
set(deb_refusal "")
if(NOT FABRIC_FILE_PROGRAM OR NOT FABRIC_DPKG_SHLIBDEPS)
  string(CONCAT deb_refusal "fabric_debs: needs file and dpkg-shlibdeps "
    "(apt-get install file dpkg-dev, then reconfigure)")
elseif(NOT CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  string(CONCAT deb_refusal "fabric_debs: configure with -DCMAKE_INSTALL_PREFIX=/usr (this build "
    "installs to ${CMAKE_INSTALL_PREFIX}; the packages are Debian's /usr)")
endif()
if(deb_refusal)
  add_custom_target(fabric_debs
    COMMAND ${CMAKE_COMMAND} -E echo "${deb_refusal}"
    COMMAND ${CMAKE_COMMAND} -E false
    VERBATIM)
  return()
endif()
add_custom_target(fabric_debs
  COMMAND ${CMAKE_COMMAND} -E rm -rf ${PROJECT_BINARY_DIR}/debs
  COMMAND ${CMAKE_CPACK_COMMAND} --config ${PROJECT_BINARY_DIR}/CPackConfig.cmake
  WORKING_DIRECTORY ${PROJECT_BINARY_DIR}
  COMMENT "Debian packages in ${PROJECT_BINARY_DIR}/debs"
  VERBATIM)
# cpack runs the install rules, which need every installed file built: the binaries and the
# pages and completions they generate.
foreach(binary fabric-agent fabricctl fabric-probe fabric-env fabric-cni)
  add_dependencies(fabric_debs ${binary} ${binary}_docs)
endforeach()
if(TARGET fabric_spank)
  add_dependencies(fabric_debs fabric_spank)
endif()

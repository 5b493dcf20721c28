# Debian packages from this build (CPack's DEB generator): `cmake --build BUILD --target
# fabric_debs` writes BUILD/debs/fabric-agent_VERSION_ARCH.deb (the binaries, the systemd unit
# with its sysusers.d and tmpfiles.d entries, /etc/default/fabric-agent and the config as
# conffiles, man pages and completions) and fabric-agent-spank_VERSION_ARCH.deb (the Slurm
# plugin, where libslurm-dev was there to build it). deploy/debian/README.md: how to build,
# install and test them. Configure with -DCMAKE_INSTALL_PREFIX=/usr: the unit and the SPANK
# plugin name the binaries' installed paths.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME fabric-agent)
set(CPACK_PACKAGE_VENDOR "fabric-agent")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "fabric-agent maintainers <fabric-agent@example.org>")
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/debs)
set(CPACK_OUTPUT_FILE_PREFIX ${PROJECT_BINARY_DIR}/debs)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL agent)
if(TARGET fabric_spank)
  list(APPEND CPACK_COMPONENTS_ALL spank)
endif()
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://example.org/fabric-agent")
# Depends from the binaries' shared libraries (dpkg-shlibdeps).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS OFF)

set(CPACK_DEBIAN_AGENT_PACKAGE_NAME fabric-agent)
set(CPACK_COMPONENT_AGENT_DESCRIPTION "RDMA fabric agent for GPU clusters
 fabric-agent discovers a host's RDMA NICs, ports, GID tables, SR-IOV functions, GPUs and the
 PCIe/NUMA topology between them, picks the NIC, port and GID index for each GPU and renders
 the NCCL, RCCL and UCX environment, announces pod addresses, probes RDMA bandwidth and latency
 between hosts, and serves it all over gRPC, Prometheus metrics, health checks and NFD labels.
 .
 This package holds the daemon (a systemd service, enabled on install but not started),
 fabricctl, fabric-probe, the static fabric-env and the chained CNI plugin fabric-cni.")
# The verbs providers libibverbs loads with dlopen (shlibdeps cannot see them); the kernel
# modules' loader.
set(CPACK_DEBIAN_AGENT_PACKAGE_RECOMMENDS "ibverbs-providers, rdma-core")
set(CPACK_DEBIAN_AGENT_PACKAGE_CONTROL_EXTRA
  ${PROJECT_SOURCE_DIR}/deploy/debian/postinst ${PROJECT_SOURCE_DIR}/deploy/debian/prerm
  ${PROJECT_SOURCE_DIR}/deploy/debian/postrm ${PROJECT_SOURCE_DIR}/deploy/debian/conffiles)
set(CPACK_DEBIAN_AGENT_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_DEBIAN_SPANK_PACKAGE_NAME fabric-agent-spank)
set(CPACK_COMPONENT_SPANK_DESCRIPTION "Slurm SPANK plugin of the RDMA fabric agent
 The plugin gives every Slurm task the NCCL/RCCL/UCX environment of its GPUs from
 fabric-agent's published host (srun --fabric-env), through fabricctl and fabric-env.
 Name it in /etc/slurm/plugstack.conf.")
# fabricctl and fabric-env of the same build; slurmd's library comes from shlibdeps.
set(CPACK_DEBIAN_SPANK_PACKAGE_DEPENDS "fabric-agent (= ${PROJECT_VERSION})")
set(CPACK_DEBIAN_SPANK_PACKAGE_SECTION admin)

include(CPack)

add_custom_target(fabric_debs
  COMMAND ${CMAKE_COMMAND} -E rm -rf ${PROJECT_BINARY_DIR}/debs
  COMMAND ${CMAKE_CPACK_COMMAND} --config ${PROJECT_BINARY_DIR}/CPackConfig.cmake
  DEPENDS fabric-agent fabricctl fabric-probe fabric-cni fabric-env
  WORKING_DIRECTORY ${PROJECT_BINARY_DIR}
  COMMENT "Debian packages in ${PROJECT_BINARY_DIR}/debs"
  VERBATIM)
if(TARGET fabric_spank)
  add_dependencies(fabric_debs fabric_spank)
endif()

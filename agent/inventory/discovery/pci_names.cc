#include "agent/inventory/discovery/pci_names.h"

extern "C" {
#include <pci/pci.h>
}

#include <setjmp.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace fabric {
namespace {

// libpci reports through callbacks, and `error` must not return. It is called when the database
// has a line libpci cannot parse (the whole load fails then) or memory runs out; we never call
// pci_init, which would also call it when no access method works. The lookup in progress set a
// jump point: the database is marked unusable and lookups give no names from then on. Only C
// frames of libpci lie between, so no destructor is skipped.
thread_local sigjmp_buf* t_jump = nullptr;

// GNU attributes, not [[noreturn]]: libpci's pointer type carries noreturn, which clang checks.
__attribute__((noreturn, format(printf, 1, 2))) void PciError(char* msg, ...) {
  va_list ap;
  va_start(ap, msg);
  std::fputs("fabric: PCI ID database unusable: ", stderr);
  std::vfprintf(stderr, msg, ap);
  std::fputc('\n', stderr);
  va_end(ap);
  if (t_jump != nullptr) siglongjmp(*t_jump, 1);
  std::abort();
}
// Comments and warnings of libpci's parser: nothing to act on.
void PciQuiet(char*, ...) {}

class LibPci final : public PciNames {
 public:
  explicit LibPci(const std::string& ids_file) : ids_file_(ids_file), access_(pci_alloc()) {
    access_->error = PciError;
    access_->warning = PciQuiet;
    access_->debug = PciQuiet;
    access_->id_lookup_mode = 0;  // No cache file, no DNS.
    // libpci keeps the pointer (to_be_freed 0): the string lives as long as this object.
    if (!ids_file_.empty())
      pci_set_name_list_path(access_, const_cast<char*>(ids_file_.c_str()), 0);
  }
  ~LibPci() override { pci_cleanup(access_); }
  LibPci(const LibPci&) = delete;
  LibPci& operator=(const LibPci&) = delete;

  std::string Vendor(uint16_t vendor) const override {
    return Lookup(PCI_LOOKUP_VENDOR, vendor, 0);
  }
  std::string Device(uint16_t vendor, uint16_t device) const override {
    return Lookup(PCI_LOOKUP_DEVICE, vendor, device);
  }

 private:
  std::string Lookup(int what, int vendor, int device) const {
    char buf[256];
    std::lock_guard<std::mutex> lock(mu_);  // libpci's name cache is not thread-safe.
    if (broken_) return "";
    sigjmp_buf jump;
    const char* volatile name = nullptr;  // Written between sigsetjmp and a possible longjmp.
    if (sigsetjmp(jump, 0) == 0) {
      t_jump = &jump;
      name = pci_lookup_name(access_, buf, sizeof(buf),
                             what | PCI_LOOKUP_NO_NUMBERS | PCI_LOOKUP_NO_HWDB, vendor, device);
    } else {
      broken_ = true;  // Its half-loaded tables are left to pci_cleanup.
    }
    t_jump = nullptr;
    return name == nullptr ? std::string() : std::string(name);
  }

  mutable std::mutex mu_;
  mutable bool broken_ = false;  // The database failed to load: no names.
  const std::string ids_file_;
  pci_access* access_;
};

}  // namespace

std::unique_ptr<PciNames> LibPciNames(const std::string& ids_file) {
  return std::make_unique<LibPci>(ids_file);
}

}  // namespace fabric

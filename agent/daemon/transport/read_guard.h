// The rapid-reset guard on gRPC's own reads, so that the Unix socket is guarded without a relay.
// gRPC 1.51 reads each connection with recvmsg(2) (src/core/lib/iomgr/tcp_posix.cc) on the
// descriptor the listener handed it (grpc::AddInsecureChannelFromFd). A binary that links this
// library defines recvmsg and exports it (-Wl,--export-dynamic-symbol), so libgrpc's reads come
// here first: the bytes read on a guarded descriptor go through that connection's H2Guard where
// they lie, with no copy and no second hop. (The relay costs a local call about 35 us: two more
// socket writes and two more wake-ups per message.) A connection over its reset budget is shut
// down and its read fails with ECONNRESET, which gRPC handles as any broken connection. Every
// other descriptor passes straight to the C library's recvmsg.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace fabric::read_guard {

// Whether gRPC's reads reach this guard: the running binary exports recvmsg and the dynamic
// linker resolves it here. False: guarding a descriptor would guard nothing (use the relay).
bool Active();

// From now on, the bytes read on `fd` (a connected socket) go through a fresh H2Guard with the
// given budget; `who` names the client in the log. Call before gRPC gets the descriptor.
void Guard(int fd, std::string who, double resets_per_second, double reset_burst);
// `fd` is no longer guarded (it is handed to gRPC unguarded, or closed).
void Forget(int fd);

// Connections shut down for resetting streams over budget, since the process started.
uint64_t ResetFloods();

}  // namespace fabric::read_guard

// The kubelet's side of the device plugin API for tests: its Registration service on a Unix
// socket (the same generated v1beta1 API the agent serves), recording each Register.
#pragma once

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "k8s/deviceplugin/v1beta1/api.grpc.pb.h"

namespace fabric::testing {

class FakeKubelet final : public v1beta1::Registration::Service {
 public:
  explicit FakeKubelet(const std::string& socket) {
    grpc::ServerBuilder b;
    b.AddListeningPort("unix:" + socket, grpc::InsecureServerCredentials());
    b.RegisterService(this);
    server_ = b.BuildAndStart();
  }
  ~FakeKubelet() override { server_->Shutdown(); }
  grpc::Status Register(grpc::ServerContext*, const v1beta1::RegisterRequest* req,
                        v1beta1::Empty*) override {
    std::lock_guard<std::mutex> lock(mu_);
    requests_.push_back(*req);
    cv_.notify_all();
    return grpc::Status::OK;
  }
  // The requests once there are `n`; fails the test after a minute.
  std::vector<v1beta1::RegisterRequest> WaitFor(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    EXPECT_TRUE(cv_.wait_for(lock, std::chrono::seconds(60), [&] { return requests_.size() >= n; }))
        << "no registration " << n;
    return requests_;
  }

 private:
  std::unique_ptr<grpc::Server> server_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<v1beta1::RegisterRequest> requests_;
};

// The bytes of an AllocateRequest whose one container asks for `id`, whatever its bytes (a
// generated client refuses a string that is not UTF-8; the kubelet's peers need not).
inline std::string AllocateBytes(const std::string& id) {
  const std::string container = std::string("\x0a") + static_cast<char>(id.size()) + id;
  return std::string("\x0a") + static_cast<char>(container.size()) + container;
}

// One Allocate of raw `bytes` on the plugin socket `socket`: its status.
inline grpc::Status RawAllocate(const std::string& socket, const std::string& bytes) {
  grpc::GenericStub stub(grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials()));
  grpc::Slice slice(bytes);
  grpc::ByteBuffer req(&slice, 1);
  grpc::ByteBuffer resp;
  grpc::ClientContext ctx;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, "/v1beta1.DevicePlugin/Allocate", grpc::StubOptions(), &req, &resp,
                 [&](grpc::Status s) { done.set_value(s); });
  return done.get_future().get();
}

}  // namespace fabric::testing

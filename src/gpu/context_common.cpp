// The parts of Context shared by the native (context.cpp) and the browser (web/context_web.cpp)
// implementations: feature lookup and the error / device-loss bookkeeping that check() reports.
#include "gpu/context.h"

#include "core/error.h"

namespace wgllm::gpu {

bool Context::has_feature(WGPUFeatureName f) const {
  for (auto e : d_.enabled)
    if (e == f) return true;
  return false;
}

void Context::on_error(const std::string& msg) {
  std::lock_guard<std::mutex> lk(error_mu_);
  if (error_.empty()) error_ = msg;
}
void Context::throw_recorded_error() {
  std::unique_lock<std::mutex> lk(error_mu_);
  if (error_.empty()) return;
  std::string e = error_;
  if (!lost_) error_.clear();
  lk.unlock();
  throw Error(e);
}
void Context::on_lost(const std::string& msg) {
  std::lock_guard<std::mutex> lk(error_mu_);
  lost_ = true;
  if (error_.empty()) error_ = "WebGPU device lost: " + msg;
}

}  // namespace wgllm::gpu

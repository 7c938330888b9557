// The parts of Context shared by the native (context.cpp) and the browser (web/context_web.cpp)
// implementations: feature lookup and the error / device-loss bookkeeping that check() reports.
#include "gpu/context.h"

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
void Context::on_lost(const std::string& msg) {
  std::lock_guard<std::mutex> lk(error_mu_);
  lost_ = true;
  if (error_.empty()) error_ = "WebGPU device lost: " + msg;
}

}  // namespace wgllm::gpu

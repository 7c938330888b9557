// `wgllm chat` over a Session: streamed replies, /regen /undo /edit /save /load (chat_session.cpp).
#pragma once
#include <string>

#include "options.h"

namespace wgllm::cli {
/// Runs the interactive loop on stdin/stdout until an empty line or EOF. Returns the exit code.
int run_chat(const CommonOptions& o, const std::string& system);
}  // namespace wgllm::cli

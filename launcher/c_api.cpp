// The C library (launcher/c_api.h) over EmbeddedEngine: every entry point catches, and turns
// what it caught into the error JSON the host raises.
#include "launcher/c_api.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/chat_template.h"
#include "launcher/embedded_engine.h"

struct nv_engine {
  std::unique_ptr<nanovllm::EmbeddedEngine> engine;
};

namespace {

char* copy_out(const std::string& text) {
  char* p = static_cast<char*>(std::malloc(text.size() + 1));
  if (p) std::memcpy(p, text.c_str(), text.size() + 1);
  return p;
}

void set_error(char** error, const std::string& type, const std::string& message) {
  if (error) *error = copy_out(nlohmann::json{{"type", type}, {"message", message}}.dump());
}

// Runs `body`; an exception becomes *error (EngineError keeps its type; bad JSON from the host
// is a TypeError; anything else a RuntimeError).
template <typename T, typename Body>
T guarded(char** error, T failed, Body&& body) {
  if (error) *error = nullptr;
  try {
    return body();
  } catch (const nanovllm::EngineError& e) {
    set_error(error, e.type, e.what());
  } catch (const nlohmann::json::exception& e) {
    set_error(error, "TypeError", std::string("not JSON of the expected shape: ") + e.what());
  } catch (const std::exception& e) {
    set_error(error, "RuntimeError", e.what());
  }
  return failed;
}

// The folder this library was loaded from: nanovllm-worker is looked for there.
std::string library_dir() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&library_dir), &info) == 0 || !info.dli_fname) return ".";
  return std::filesystem::path(info.dli_fname).parent_path().string();
}

nanovllm::EmbeddedEngine& engine_of(nv_engine* e) {
  if (!e || !e->engine) throw nanovllm::EngineError("RuntimeError", "no engine (it was destroyed)");
  return *e->engine;
}

}  // namespace

extern "C" {

nv_engine* nv_engine_create(const char* options_json, char** error) {
  return guarded<nv_engine*>(error, nullptr, [&] {
    auto e = std::make_unique<nv_engine>();
    e->engine = std::make_unique<nanovllm::EmbeddedEngine>(options_json ? options_json : "{}",
                                                           library_dir());
    return e.release();
  });
}

void nv_engine_destroy(nv_engine* engine) {
  delete engine;
}

char* nv_engine_encode(nv_engine* engine, const char* text, char** error) {
  return guarded<char*>(error, nullptr, [&] {
    return copy_out(nlohmann::json(engine_of(engine).tokenizer().encode(text ? text : "")).dump());
  });
}

char* nv_engine_decode(nv_engine* engine, const char* token_ids_json, int skip_special_tokens,
                       char** error) {
  return guarded<char*>(error, nullptr, [&] {
    const auto ids = nlohmann::json::parse(token_ids_json).get<std::vector<int32_t>>();
    return copy_out(engine_of(engine).tokenizer().decode(ids, skip_special_tokens != 0));
  });
}

char* nv_engine_apply_chat_template(nv_engine* engine, const char* messages_json,
                                    int add_generation_prompt, int enable_thinking, char** error) {
  return guarded<char*>(error, nullptr, [&] {
    engine_of(engine);
    return copy_out(nanovllm::render_chat(nlohmann::json::parse(messages_json),
                                          add_generation_prompt != 0, enable_thinking != 0));
  });
}

int64_t nv_engine_add_requests(nv_engine* engine, const char* requests_json, int64_t first_index,
                               char** error) {
  return guarded<int64_t>(error, -1, [&] {
    return engine_of(engine).add_requests(nlohmann::json::parse(requests_json), first_index);
  });
}

char* nv_engine_step(nv_engine* engine, char** error) {
  return guarded<char*>(error, nullptr, [&] {
    return copy_out(
        engine_of(engine).step().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  });
}

void nv_engine_abort_all(nv_engine* engine) {
  char* ignored = nullptr;
  guarded<int>(&ignored, 0, [&] {
    engine_of(engine).abort_all();
    return 0;
  });
  std::free(ignored);
}

char* nv_engine_info(nv_engine* engine, char** error) {
  return guarded<char*>(error, nullptr, [&] { return copy_out(engine_of(engine).info().dump()); });
}

void nv_free(void* p) {
  std::free(p);
}

}  // extern "C"

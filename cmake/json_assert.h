// Forced into every C++ file of ours before anything else (CMakeLists.txt says why): a failed
// nlohmann::json precondition traps at once instead of reading past the end of a container.
#pragma once

#define JSON_ASSERT(x) ((x) ? void(0) : __builtin_trap())

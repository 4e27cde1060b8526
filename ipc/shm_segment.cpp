#include "ipc/shm_segment.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <boost/interprocess/exceptions.hpp>
#include <boost/interprocess/mapped_region.hpp>
#include <boost/interprocess/shared_memory_object.hpp>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>

#include "ipc/ipc_error.h"
#include "ipc/liveness.h"

namespace nanovllm {
namespace bip = boost::interprocess;

struct ShmSegment::Impl {
  bip::shared_memory_object object;
  bip::mapped_region region;
};

ShmSegment::ShmSegment(std::string name, std::unique_ptr<Impl> impl)
    : name_(std::move(name)), impl_(std::move(impl)) {}
ShmSegment::ShmSegment(ShmSegment&&) noexcept = default;
ShmSegment& ShmSegment::operator=(ShmSegment&&) noexcept = default;
ShmSegment::~ShmSegment() = default;

void* ShmSegment::data() const {
  return impl_->region.get_address();
}
size_t ShmSegment::size() const {
  return impl_->region.get_size();
}

ShmSegment ShmSegment::create(const std::string& name, size_t bytes) {
  auto impl = std::make_unique<Impl>();
  try {
    bip::permissions perm;
    perm.set_permissions(0600);  // only our user's processes may map the run's channel
    impl->object = bip::shared_memory_object(bip::create_only, name.c_str(), bip::read_write, perm);
    impl->object.truncate(static_cast<bip::offset_t>(bytes));
    impl->region = bip::mapped_region(impl->object, bip::read_write);
  } catch (const bip::interprocess_exception& e) {
    if (impl->region.get_address() == nullptr) bip::shared_memory_object::remove(name.c_str());
    throw IpcError("cannot create shared-memory segment '" + name + "' of " +
                   std::to_string(bytes) + " bytes: " + e.what());
  }
  // Fresh POSIX shm is zero-filled already; this makes it explicit and touches the pages now.
  std::memset(impl->region.get_address(), 0, impl->region.get_size());
  return ShmSegment(name, std::move(impl));
}

ShmSegment ShmSegment::open(const std::string& name) {
  auto impl = std::make_unique<Impl>();
  try {
    impl->object = bip::shared_memory_object(bip::open_only, name.c_str(), bip::read_write);
    impl->region = bip::mapped_region(impl->object, bip::read_write);
  } catch (const bip::interprocess_exception& e) {
    throw IpcError("cannot open shared-memory segment '" + name + "': " + e.what());
  }
  return ShmSegment(name, std::move(impl));
}

bool ShmSegment::remove(const std::string& name) {
  return bip::shared_memory_object::remove(name.c_str());
}

std::string make_segment_name(const std::string& prefix) {
  std::random_device rd;
  const uint64_t r = (uint64_t{rd()} << 32) ^ rd();
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(r));
  return prefix + "-" + std::to_string(::getpid()) + "-" + hex;
}

pid_t segment_owner_pid(const std::string& name, const std::string& prefix) {
  if (name.size() <= prefix.size() + 1 || name.compare(0, prefix.size(), prefix) != 0 ||
      name[prefix.size()] != '-')
    return -1;
  size_t i = prefix.size() + 1;
  const size_t digits_begin = i;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9') ++i;
  if (i == digits_begin || i - digits_begin > 9 || i >= name.size() || name[i] != '-') return -1;
  const size_t hex_begin = ++i;
  while (i < name.size() && std::isxdigit(static_cast<unsigned char>(name[i]))) ++i;
  if (i == hex_begin || i != name.size()) return -1;
  return static_cast<pid_t>(std::stol(name.substr(digits_begin, hex_begin - 1 - digits_begin)));
}

std::vector<std::string> sweep_stale_segments(const std::string& prefix) {
  std::vector<std::string> removed;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", ec)) {
    const std::string name = entry.path().filename().string();
    const pid_t pid = segment_owner_pid(name, prefix);
    if (pid <= 0 || process_alive(pid)) continue;
    if (ShmSegment::remove(name)) {
      spdlog::info("removed stale shared-memory segment /dev/shm/{} (launcher pid {} is gone)",
                   name, pid);
      removed.push_back(name);
    }
  }
  return removed;
}

}  // namespace nanovllm

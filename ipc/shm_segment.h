// One named POSIX shared-memory segment (Boost.Interprocess shared_memory_object + a
// read-write mapped_region). The launcher creates the run's segment before fork; the children
// inherit the mapping, so they never open it by name (open() exists for tools and tests).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace nanovllm {

class ShmSegment {
 public:
  // create_only, mode 0600, zero-filled, mapped. Throws IpcError if the name exists or the
  // segment cannot be created (naming the segment and the reason).
  static ShmSegment create(const std::string& name, size_t bytes);
  // Maps an existing segment (its whole size). Throws IpcError when absent.
  static ShmSegment open(const std::string& name);
  // Removes the name (existing mappings stay valid). false when there was nothing to remove.
  static bool remove(const std::string& name);

  ShmSegment(ShmSegment&&) noexcept;
  ShmSegment& operator=(ShmSegment&&) noexcept;
  ~ShmSegment();  // unmaps; never removes the name (the launcher does, explicitly)

  void* data() const;
  size_t size() const;
  const std::string& name() const { return name_; }

 private:
  struct Impl;
  ShmSegment(std::string name, std::unique_ptr<Impl> impl);
  std::string name_;
  std::unique_ptr<Impl> impl_;
};

// "<prefix>-<pid>-<16 random hex digits>": the pid lets a later run tell a stale segment of a
// dead launcher from a live run's; the random part keeps two runs of one pid (tests) apart.
std::string make_segment_name(const std::string& prefix);

// Parses "<prefix>-<pid>-<hex>"; returns the pid, or -1 when `name` is not of that form.
pid_t segment_owner_pid(const std::string& name, const std::string& prefix);

// Removes every segment under /dev/shm named "<prefix>-<pid>-<hex>" whose pid is not alive
// (left behind by a launcher killed with SIGKILL). Returns the names removed. A live pid's
// segment is never touched, even if that pid was reused by an unrelated process.
std::vector<std::string> sweep_stale_segments(const std::string& prefix);

}  // namespace nanovllm

#include "ipc/step_command_serialization.h"

#include <boost/archive/archive_exception.hpp>
#include <boost/archive/binary_iarchive.hpp>
#include <boost/archive/binary_oarchive.hpp>
#include <istream>
#include <ostream>
#include <streambuf>

#include "kernels/check.h"

namespace nanovllm {
namespace {

// Appends to a byte vector: saves the string copy an ostringstream would make.
class VectorOutBuf : public std::streambuf {
 public:
  explicit VectorOutBuf(std::vector<uint8_t>& out) : out_(out) {}

 protected:
  int_type overflow(int_type ch) override {
    if (ch != traits_type::eof()) out_.push_back(static_cast<uint8_t>(ch));
    return ch;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    out_.insert(out_.end(), reinterpret_cast<const uint8_t*>(s),
                reinterpret_cast<const uint8_t*>(s) + n);
    return n;
  }

 private:
  std::vector<uint8_t>& out_;
};

// Reads a byte span in place.
class SpanInBuf : public std::streambuf {
 public:
  explicit SpanInBuf(std::span<const uint8_t> bytes) {
    // streambuf's get area is char*, never written through by an istream.
    char* b = const_cast<char*>(reinterpret_cast<const char*>(bytes.data()));
    setg(b, b, b + bytes.size());
  }
};

constexpr unsigned kArchiveFlags = boost::archive::no_header;

}  // namespace

std::vector<uint8_t> encode_step_command(const StepCommand& command) {
  std::vector<uint8_t> out;
  out.reserve(64 + 4 * (3 * command.input_ids.size() + command.block_tables.size()));
  VectorOutBuf buf(out);
  {
    boost::archive::binary_oarchive ar(buf, kArchiveFlags);
    ar << command;
  }
  return out;
}

StepCommand decode_step_command(std::span<const uint8_t> bytes) {
  StepCommand command;
  SpanInBuf buf(bytes);
  try {
    boost::archive::binary_iarchive ar(buf, kArchiveFlags);
    ar >> command;
  } catch (const std::exception& e) {  // archive_exception or a stream error
    CHECK_MSG(false, "step command of " << bytes.size() << " bytes does not decode: " << e.what());
  }
  const auto kind = static_cast<uint8_t>(command.kind);
  CHECK_MSG(kind <= static_cast<uint8_t>(StepKind::kExit),
            "step command with unknown kind " << int{kind});
  return command;
}

}  // namespace nanovllm

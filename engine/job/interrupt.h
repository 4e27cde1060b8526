// The stop signals on rank 0 (and, while they load, on the workers): what a terminal's Ctrl-C,
// a closed terminal or a `kill` asks of a run. Once the job's step loop polls, a stop signal
// only sets a flag, so the current step completes, finished results stay written and the
// workers are told to exit. Before that (validation, loading the model) nothing can be lost,
// so the handler ends the process at once; a step loop that cannot come soon (a minute of
// weight loading) must not keep a user who asked to stop waiting.
#pragma once

#include <array>
#include <csignal>
#include <cstdint>
#include <optional>
#include <string>

namespace nanovllm {

// Every catchable signal whose default would end the process without cleaning up, and that
// someone sends to ask the run to stop: Ctrl-C, kill's default, a hang-up (closed terminal,
// dropped SSH), Ctrl-\, and the user signals. SIGPIPE is not one: the kernel raises it on our
// own write into a closed pipe; it is no request to stop and whoever should hear about it is
// gone.
inline constexpr std::array<int, 6> kStopSignals{SIGINT,  SIGTERM, SIGHUP,
                                                 SIGQUIT, SIGUSR1, SIGUSR2};

// "SIGHUP (Hangup)".
std::string describe_signal(int sig);

// Installs the handler for every stop signal. Until poll_interrupts_from_now(), a stop signal
// ends the process with 128 + signal (`program` non-null: after writing "<program>: interrupted
// by SIGHUP (Hangup) before the first step; ..." to stderr). Clears an earlier request.
void install_interrupt_handler(const char* program);
// From now on a stop signal sets the flag the step loop polls; a second one ends the process
// at once, as above.
void poll_interrupts_from_now();
// Stop signals are ignored from now on (workers: rank 0 ends their loop once it stopped).
void ignore_stop_signals();

bool interrupt_requested();
int interrupt_signal();  // the stop signal that came first; 0: none

// What an interrupted job kept, for the launcher's closing line.
struct InterruptedJob {
  int64_t finished_results = 0;     // result lines written (errors included)
  int64_t unfinished_requests = 0;  // requests that got no result
};
void record_interrupted_job(const InterruptedJob& job);  // by the job, once it stopped
std::optional<InterruptedJob> interrupted_job();

// "interrupted by SIGHUP (Hangup): 3 finished results kept, 2 requests unfinished" (without a
// job: "...; results written so far are kept").
std::string interruption_summary(int sig, const std::optional<InterruptedJob>& job);

}  // namespace nanovllm

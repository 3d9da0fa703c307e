// Flight-record dumps on a signal the user chooses (TUTTI_FLIGHT_RECORDER_SIGNAL): the handler only
// writes the signal's number to a pipe (write(2) is async-signal-safe; nothing else is done in
// it), and a small watcher thread reads the pipe and runs the dumps of the communicators that
// asked for that signal. The thread exists while some communicator watches a signal.
#pragma once

#include <functional>
#include <memory>
#include <string>

namespace tutti {

// The signal number text names: "SIGUSR2", "USR2" (any case) or "12". Throws Error (InvalidUsage)
// naming TUTTI_FLIGHT_RECORDER_SIGNAL for anything else, or a signal that cannot be caught.
int parseFlightSignal(const std::string& text);

// Until the returned handle is released, dump() runs on the watcher's thread each time signal
// signo arrives. Releasing the handle waits for a dump of it that is running, so dump may use
// what the caller frees after it. The first watch of a signal installs the handler (a handler the
// process had is called after ours); the last release puts the old one back. Throws Error
// (System) when the pipe, the thread or the handler cannot be made.
std::shared_ptr<void> watchFlightSignal(int signo, std::function<void()> dump);

}  // namespace tutti

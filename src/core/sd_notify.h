// systemd's service notification protocol (sd_notify(3)) without libsystemd: one datagram of
// "KEY=VALUE" lines to the AF_UNIX socket named by $NOTIFY_SOCKET (a path, or "@name" for the
// abstract namespace). A unit with Type=notify counts the service as started at READY=1, and
// STOPPING=1 says a stop has begun. Outside systemd (no $NOTIFY_SOCKET) nothing is sent.
#pragma once

#include <string>

namespace tmill {

// Sends `state` ("READY=1", "STOPPING=1\nSTATUS=draining", ...). Returns true when a datagram was
// sent; false when $NOTIFY_SOCKET is unset or not a path/abstract name (vsock: is not supported) or
// sending failed. Never throws; safe from any thread.
bool sd_notify(const std::string& state);

}  // namespace tmill

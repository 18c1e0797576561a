// sd_notify: the datagram systemd reads for Type=notify services, to a path socket and to an
// abstract one; nothing without $NOTIFY_SOCKET.
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/sd_notify.h"
#include "test_support.h"

using namespace tmill;

namespace {

// A bound datagram socket standing in for systemd's notification socket.
struct Listener {
  int fd = -1;
  explicit Listener(const std::string& name) {
    fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, name.data(), name.size());
    socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
    if (name[0] == '@') a.sun_path[0] = '\0';
    else len += 1;
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), len), 0) << std::strerror(errno);
    timeval tv{2, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~Listener() { close(fd); }
  std::string receive() const {
    char buf[4096];
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    return n < 0 ? std::string("<nothing>") : std::string(buf, static_cast<size_t>(n));
  }
};

}  // namespace

TEST(SdNotify, SendsTheStateToAPathSocket) {
  const std::string path = test::temp_dir() + "/notify.sock";
  Listener l(path);
  setenv("NOTIFY_SOCKET", path.c_str(), 1);
  EXPECT_TRUE(sd_notify("READY=1\nSTATUS=serving"));
  EXPECT_EQ(l.receive(), "READY=1\nSTATUS=serving");
  EXPECT_TRUE(sd_notify("STOPPING=1"));
  EXPECT_EQ(l.receive(), "STOPPING=1");
  unsetenv("NOTIFY_SOCKET");
}

TEST(SdNotify, SendsToAnAbstractSocket) {
  const std::string name = "@tokenmill-sd-notify-test-" + std::to_string(getpid());
  Listener l(name);
  setenv("NOTIFY_SOCKET", name.c_str(), 1);
  EXPECT_TRUE(sd_notify("READY=1"));
  EXPECT_EQ(l.receive(), "READY=1");
  unsetenv("NOTIFY_SOCKET");
}

TEST(SdNotify, NothingWithoutASocket) {
  unsetenv("NOTIFY_SOCKET");
  EXPECT_FALSE(sd_notify("READY=1"));
  setenv("NOTIFY_SOCKET", "vsock:2:1234", 1);  // not supported: refused, not crashed
  EXPECT_FALSE(sd_notify("READY=1"));
  setenv("NOTIFY_SOCKET", "/nonexistent/dir/notify.sock", 1);
  EXPECT_FALSE(sd_notify("READY=1"));
  unsetenv("NOTIFY_SOCKET");
}

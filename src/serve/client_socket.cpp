#include "serve/client_socket.h"

#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>

namespace brisk::serve {

namespace {

int port_of(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port);
  if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(a).sin6_port);
  return -1;
}

bool has_ports(int fd, int local_port, int remote_port) {
  sockaddr_storage local{}, remote{};
  socklen_t ll = sizeof local, rl = sizeof remote;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &ll) != 0) return false;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &rl) != 0) return false;
  return port_of(local) == local_port && port_of(remote) == remote_port;
}

}  // namespace

int find_connection_socket(int local_port, int remote_port) {
  if (local_port <= 0 || remote_port <= 0) return -1;
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return -1;
  int found = -1;
  while (const dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    if (has_ports(static_cast<int>(fd), local_port, remote_port)) {
      found = static_cast<int>(fd);
      break;
    }
  }
  closedir(dir);
  return found;
}

bool peer_closed(int fd) {
  char c;
  const ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

}  // namespace brisk::serve

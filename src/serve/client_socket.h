// Finding the socket of the connection a request came on, to notice a client that hung up
// while its non-streaming answer is being generated. httplib (0.11, Debian's) only learns
// of a hang-up when it writes, and gives handlers no access to the socket.
#pragma once
#include <string>

namespace brisk::serve {

// The descriptor of this process's TCP socket whose local and remote ports are these, or
// -1 (looks through /proc/self/fd; a few hundred microseconds with many connections).
int find_connection_socket(int local_port, int remote_port);

// True when the peer of `fd` has closed the connection (or it failed).
bool peer_closed(int fd);

}  // namespace brisk::serve

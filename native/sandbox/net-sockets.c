/*
 * Sockets the network table could not govern. The table speaks of TCP, UDP and ICMP
 * echo on IPv4 and IPv6; the filter lets those (and unix and netlink sockets) be made in
 * the kernel, and sends every other socket(2) here: SCTP and MPTCP (which open paths to
 * other addresses by themselves, without a connect to check), UDP-Lite, and the other
 * families (vsock reaches the hypervisor, TIPC, RDS, Bluetooth, …). Under a policy they
 * are refused, as a kernel without them would answer (EAFNOSUPPORT, EPROTONOSUPPORT);
 * with the network open they are made as asked. socket(2) has no argument in memory,
 * so letting it continue cannot be raced.
 *
 * setsockopt(2) is notified for the options that route a packet past its destination
 * (IPv4 source routes, IPv6 routing headers): the packet would first go to whatever
 * address the route names, which nobody checked.
 */
#include "sandbox.h"

#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>

enum bsh_action bsh_dec_socket(struct bsh_call *c, const uint64_t *a) {
  if (!bsh_net_policy_on()) return BSH_ACT_CONTINUE;
  int domain = (int)a[0];
  if (domain != AF_INET && domain != AF_INET6)
    return bsh_report(c, EAFNOSUPPORT, "socket family %d is not governed by the network policy", domain);
  return bsh_report(c, EPROTONOSUPPORT, "socket type %d, protocol %d is not governed by the network policy (TCP, UDP, ICMP are)",
                    (int)(a[1] & BSH_SOCK_TYPE_MASK), (int)a[2]);
}

enum bsh_action bsh_dec_setsockopt(struct bsh_call *c, const uint64_t *a) {
  (void)a;
  if (!bsh_net_policy_on()) return BSH_ACT_CONTINUE;
  return bsh_report(c, EPERM, "a source route would send packets past the checked address");
}

#!/bin/bash
# The test topology of an installation of several hosts on one machine
# (docs/decisions.md, "Several hosts"): each host is a network namespace with
# a veth to a switch (a bridge in a namespace of its own), on a private
# subnet whose addresses exist only here; the control plane runs in the root
# namespace at the subnet's first address, on the switch's link.
#
#   topology.sh up <prefix> <n> <k>
#                                 make the switch <prefix>-sw (a namespace with
#                                 a bridge), its link <prefix>-br to the root
#                                 namespace (10.231.<k>.1/24) and the hosts
#                                 <prefix>-h1 … -h<n> (10.231.<k>.11 …)
#   topology.sh down <prefix>     kill every process in those namespaces and
#                                 remove them and their links: safe to run at
#                                 any time, after a killed test too
#
# Host i's address is 10.231.<k>.(10+i). Topologies that exist at once need
# prefixes and subnets (k, 0-255) of their own: the tests run in parallel.
set -euo pipefail

cmd=${1:?usage: topology.sh up <prefix> <n> <k> | down <prefix>}
prefix=${2:?prefix}
[[ $prefix =~ ^[a-z][a-z0-9]{1,5}$ ]] || { echo "prefix: 2-6 lowercase letters and digits" >&2; exit 2; }
bridge=$prefix-br

down() {
  # (ip netns list says "Peer netns reference is invalid" of a namespace
  # another test is deleting meanwhile: noise.)
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$prefix-h[0-9]+$" || true); do
    # Every process in it, whatever started it; twice, for what a kill forks.
    for _ in 1 2; do
      pids=$(ip netns pids "$ns" 2>/dev/null || true)
      [ -n "$pids" ] && kill -9 $pids 2>/dev/null || true
    done
    ip netns delete "$ns" 2>/dev/null || true
  done
  ip netns delete "$prefix-sw" 2>/dev/null || true
  for link in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 | grep -E "^$prefix-(h[0-9]+|br)$" || true); do
    ip link delete "$link" 2>/dev/null || true
  done
}

up() {
  local n=${1:?number of hosts} k=${2:?subnet index}
  [[ $k =~ ^[0-9]+$ ]] && [ "$k" -le 255 ] || { echo "k: 0-255" >&2; exit 2; }
  down
  # The switch: a bridge in a namespace of its own, reached from the root
  # namespace by a veth that carries the subnet's first address. Not a
  # bridge in the root namespace: bridged frames pass the IP forward hook of
  # the namespace the bridge is in (br_netfilter), and the root's holds
  # other tests' service-network tables, which drop forwarded traffic they
  # do not know (a host that did not forward before Basin): hosts' traffic
  # to each other was cut at random there.
  local sw=$prefix-sw
  ip netns add "$sw"
  ip -n "$sw" link set lo up
  ip -n "$sw" link add sw0 type bridge
  ip -n "$sw" link set sw0 up
  ip link add "$bridge" type veth peer name up0 netns "$sw"
  ip addr add "10.231.$k.1/24" dev "$bridge"
  ip link set "$bridge" up
  ip -n "$sw" link set up0 master sw0 up
  for i in $(seq 1 "$n"); do
    local ns=$prefix-h$i
    ip netns add "$ns"
    ip -n "$sw" link add "h$i" type veth peer name eth0 netns "$ns"
    ip -n "$sw" link set "h$i" master sw0 up
    ip -n "$ns" addr add "10.231.$k.$((10 + i))/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    ip -n "$ns" route add default via "10.231.$k.1"
  done
}

case $cmd in
  up) up "${3:-}" "${4:-}" ;;
  down) down ;;
  *) echo "usage: topology.sh up <prefix> <n> <k> | down <prefix>" >&2; exit 2 ;;
esac

"""Which addresses processes listen on, read from /proc: eoschaos binds only loopback."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

LISTEN = "0A"  # TCP state in /proc/net/tcp


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    try:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    except OSError:
        pass  # the process is gone
    return inodes


def address_of(hex_address: str) -> str:
    host, port = hex_address.split(":")
    raw = bytes.fromhex(host)
    # /proc/net/tcp{,6} prints each 32-bit word of the address in host (little-endian) order
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    ip = ipaddress.ip_address(words)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:  # ::ffff:127.0.0.1
        ip = ip.ipv4_mapped
    return f"{ip}:{int(port, 16)}"


def socket_owners() -> dict[str, int]:
    """socket inode -> the pid of a process holding it, over the whole process table."""
    owners = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            owners.update(dict.fromkeys(_socket_inodes(int(proc.name)), int(proc.name)))
    return owners


def listening_sockets(pid: int | None = None) -> list[tuple[str, str]]:
    """(address, socket inode) of every listening TCP socket (IPv4 and IPv6) in this process's
    network namespace, or in that of `pid` (a container's is its own)."""
    found = []
    net = Path(f"/proc/{pid}/net") if pid is not None else Path("/proc/net")
    for table in (net / "tcp", net / "tcp6"):
        try:
            lines = table.read_text().splitlines()[1:]
        except OSError:
            continue  # the process is gone
        for line in lines:
            fields = line.split()
            if fields[3] == LISTEN:
                found.append((address_of(fields[1]), fields[9]))
    return found


def listening_addresses(pids: list[int]) -> dict[int, list[str]]:
    """pid -> the addresses its TCP sockets listen on (IPv4 and IPv6), each read in the
    process's own network namespace."""
    by_namespace: dict[str, list[int]] = {}
    for pid in pids:
        try:
            by_namespace.setdefault(os.readlink(f"/proc/{pid}/ns/net"), []).append(pid)
        except OSError:
            continue  # the process is gone
    found: dict[int, list[str]] = {}
    for members in by_namespace.values():
        inodes = {inode: pid for pid in members for inode in _socket_inodes(pid)}
        for address, inode in listening_sockets(members[0]):
            if inode in inodes:
                found.setdefault(inodes[inode], []).append(address)
    return found


def is_loopback(address: str) -> bool:
    return ipaddress.ip_address(address.rsplit(":", 1)[0]).is_loopback


def stat_fields(pid: int | str) -> list[str]:
    """The fields of /proc/PID/stat after the command name: state, ppid, ... (field 22,
    the start time, is index 19). Raises OSError when the process is gone."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def descendants(pid: int) -> list[int]:
    """Every live process below `pid` (Spark's JVM runs under a launcher script)."""
    children: dict[int, list[int]] = {}
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            fields = stat_fields(proc.name)
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(proc.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def not_on_loopback(pids: list[int]) -> dict[int, list[str]]:
    """The listening addresses of `pids` that are not loopback."""
    outside = {}
    for pid, addresses in listening_addresses(pids).items():
        wide = [address for address in addresses if not is_loopback(address)]
        if wide:
            outside[pid] = wide
    return outside

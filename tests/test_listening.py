"""The listening-address reader the loopback tests rest on (tests/listening.py)."""

from __future__ import annotations

import pytest
from listening import address_of, is_loopback


@pytest.mark.parametrize(
    ("proc_net", "address", "loopback"),
    [
        ("0100007F:1F90", "127.0.0.1:8080", True),
        ("00000000:1F90", "0.0.0.0:8080", False),
        ("0101A8C0:0050", "192.168.1.1:80", False),
        ("0000000000000000FFFF00000100007F:4E20", "127.0.0.1:20000", True),
        ("00000000000000000000000001000000:4E20", "::1:20000", True),
        ("00000000000000000000000000000000:4E20", ":::20000", False),
    ],
)
def test_proc_net_addresses_read_and_classify(proc_net, address, loopback):
    assert address_of(proc_net) == address
    assert is_loopback(address) is loopback

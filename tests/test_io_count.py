"""attnlib.io_count: HBM traffic of plain and tiled attention, against the closed forms."""
import pytest

import attnlib


@pytest.mark.parametrize("T,d", [(1, 1), (64, 16), (1000, 64)])
def test_naive_is_4Td_plus_4T2(T, d):
    io = attnlib.naive_attention_io(T, d, element_size=4)
    assert (io.read, io.written) == (3 * T * d + 2 * T * T, 2 * T * T + T * d)
    assert io.nbytes == 4 * (4 * T * d + 4 * T * T)


@pytest.mark.parametrize("T,d,bq,bk", [(256, 64, 64, 128), (1000, 32, 48, 7), (5, 8, 16, 16)])
def test_flash_reads_k_and_v_once_per_query_tile(T, d, bq, bk):
    io = attnlib.flash_attention_io(T, d, bq, bk)
    n_q = -(-T // bq)
    assert io.read == T * d + n_q * 2 * T * d
    assert io.written == T * d + T


def test_flash_moves_less_and_scales_as_T2_d_over_block_q():
    d, bk = 64, 64
    for T in (1024, 4096):
        naive = attnlib.naive_attention_io(T, d).nbytes
        for bq, gain in ((64, 1.9), (256, 6.5)):
            assert naive / attnlib.flash_attention_io(T, d, bq, bk).nbytes > gain
    # four times the length: about 16 times the K/V traffic (T^2), not 4
    small, big = (attnlib.flash_attention_io(T, d, 128, bk).read for T in (1024, 4096))
    assert 15 < big / small < 16.5
    # a larger query tile (more SRAM) reads K and V fewer times
    assert attnlib.flash_attention_io(4096, d, 128, bk).read < \
        attnlib.flash_attention_io(4096, d, 64, bk).read


def test_tile_footprint():
    assert attnlib.tile_footprint(128, 64, 64) == 128 * 64 * 2 + 64 * 128 + 128 * 64 + 256
    assert attnlib.tile_footprint(1, 1, 1, d_v=3) == 1 + 4 + 1 + 3 + 2


@pytest.mark.parametrize("bad", [0, -3, 2.0, True])
def test_bad_sizes_refused(bad):
    with pytest.raises(ValueError, match="positive int"):
        attnlib.flash_attention_io(64, 16, bad, 8)
    with pytest.raises(ValueError, match="positive int"):
        attnlib.naive_attention_io(bad, 16)

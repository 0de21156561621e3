"""Tests of the parts of netreduce_verbs that need no RDMA device: `python3 -m unittest discover -s python/tests`."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from netreduce_verbs import ina, tensors  # noqa: E402
from netreduce_verbs.layout import MessageLayout, RingChunks  # noqa: E402


class InaHeaderTest(unittest.TestCase):
    def test_should_pack_tag_big_endian_then_ring_msg_len_rank(self):
        self.assertEqual(ina.pack(7, 3, 4, 2), bytes([0x4E, 0x52, 0x45, 0x44, 7, 3, 4, 2]))

    def test_should_wrap_msg_id_to_eight_bits(self):
        self.assertEqual(ina.unpack(ina.pack(1, 257, 1, 0)), (ina.INET_TAG, 1, 1, 1, 0))

    def test_should_refuse_msg_len_outside_one_byte(self):
        with self.assertRaises(ValueError):
            ina.pack(1, 0, 0, 0)
        with self.assertRaises(ValueError):
            ina.pack(1, 0, 256, 0)


class MessageLayoutTest(unittest.TestCase):
    def test_should_leave_room_for_the_header_in_every_message(self):
        layout = MessageLayout(tensor_bytes=10000, payload=1024, msg_len=4)
        self.assertEqual(layout.message_bytes, 4096)
        self.assertEqual(layout.data_bytes, 4088)
        self.assertEqual(layout.messages, 3)
        self.assertEqual(layout.padded_tensor_bytes, 3 * 4088)
        self.assertEqual(layout.message_offset(2), 8192)
        self.assertEqual(layout.data_offset(2), 8176)

    def test_should_fit_exact_multiple_without_padding_message(self):
        layout = MessageLayout(tensor_bytes=2 * 1016, payload=1024, msg_len=1)
        self.assertEqual(layout.messages, 2)

    def test_should_refuse_payload_that_is_not_whole_elements(self):
        with self.assertRaises(ValueError):
            MessageLayout(tensor_bytes=4096, payload=1022, msg_len=1)


class RingChunksTest(unittest.TestCase):
    def test_should_own_every_chunk_once_after_reduce_scatter(self):
        for world in (2, 3, 5):
            chunks = RingChunks(tensor_bytes=4 * 1000, world=world)
            owned = sorted(chunks.all_gather(rank, 0)[0] for rank in range(world))
            self.assertEqual(owned, list(range(world)))

    def test_should_receive_at_each_step_what_the_predecessor_sends(self):
        world = 4
        chunks = RingChunks(tensor_bytes=4 * 64, world=world)
        for step in range(world - 1):
            for rank in range(world):
                pred = (rank - 1) % world
                self.assertEqual(chunks.reduce_scatter(rank, step)[1], chunks.reduce_scatter(pred, step)[0])
                self.assertEqual(chunks.all_gather(rank, step)[1], chunks.all_gather(pred, step)[0])

    def test_ring_schedule_should_sum_every_chunk_over_all_ranks(self):
        """Simulate the schedule on sets of contributing ranks: every chunk ends with all of them everywhere."""
        world = 5
        chunks = RingChunks(tensor_bytes=4 * 50, world=world)
        state = [[{rank} for _ in range(world)] for rank in range(world)]
        for step in range(world - 1):
            sent = [set(state[r][chunks.reduce_scatter(r, step)[0]]) for r in range(world)]
            for r in range(world):
                state[r][chunks.reduce_scatter(r, step)[1]] |= sent[(r - 1) % world]
        for step in range(world - 1):
            sent = [set(state[r][chunks.all_gather(r, step)[0]]) for r in range(world)]
            for r in range(world):
                state[r][chunks.all_gather(r, step)[1]] = sent[(r - 1) % world]
        for r in range(world):
            for c in range(world):
                self.assertEqual(state[r][c], set(range(world)), f"rank {r} chunk {c}")


class TensorsTest(unittest.TestCase):
    def test_expected_sum_should_equal_elementwise_sum_of_rank_tensors(self):
        for dtype in ("int32", "fp32"):
            total = tensors.expected_sum(dtype, 100, 3, seed=5)
            parts = [tensors.make(dtype, 100, r, 5) for r in range(3)]
            self.assertEqual(list(total), [a + b + c for a, b, c in zip(*parts)])

    def test_fp32_sums_should_be_exact_in_any_order(self):
        parts = [tensors.make("fp32", 500, r, 9) for r in range(8)]
        forward = tensors.from_bytes("fp32", tensors.to_bytes(parts[0]))
        for p in parts[1:]:
            forward = tensors.from_bytes("fp32", tensors.add("fp32", tensors.to_bytes(forward), tensors.to_bytes(p)))
        backward = tensors.from_bytes("fp32", tensors.to_bytes(parts[-1]))
        for p in reversed(parts[:-1]):
            backward = tensors.from_bytes("fp32", tensors.add("fp32", tensors.to_bytes(backward), tensors.to_bytes(p)))
        self.assertEqual(tensors.first_mismatch(forward, backward), None)

    def test_ranks_should_get_different_tensors(self):
        self.assertNotEqual(list(tensors.make("int32", 50, 0, 1)), list(tensors.make("int32", 50, 1, 1)))

    def test_int32_add_should_wrap_like_the_appliance(self):
        a = tensors.to_bytes(tensors.from_bytes("int32", (2**31 - 1).to_bytes(4, "little", signed=True)))
        b = (1).to_bytes(4, "little", signed=True)
        self.assertEqual(list(tensors.from_bytes("int32", tensors.add("int32", a, b))), [-2**31])


if __name__ == "__main__":
    unittest.main()

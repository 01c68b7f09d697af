"""The msgpack bytes vLLM's msgspec encoder writes for one KVEventBatch: the golden of
tests/unit/engine/kv_events_test.cpp (KvEventEncoding.IsVllmsMsgspecBytes). The classes are vLLM's
(vllm/distributed/kv_events.py), re-declared field for field so no vLLM install is needed.

    .venv/bin/python tools/reference/kv_event_golden.py
"""
import msgspec

from vllm_kv_events import AllBlocksCleared, BlockRemoved, BlockStored, KVEventBatch


batch = KVEventBatch(
    ts=1764672000.25,
    events=[
        BlockStored(block_hashes=[2**64 - 1, 7], parent_block_hash=None, token_ids=[1, 300, 70000, 0],
                    block_size=2, lora_id=None, medium="GPU", lora_name=None,
                    extra_keys=[(0x8000000000000001,), None], group_idx=0, kv_cache_spec_kind="full_attention"),
        BlockStored(block_hashes=[7], parent_block_hash=2**64 - 1, token_ids=[70000, 0], block_size=2,
                    lora_id=None, medium="GPU", lora_name=None, extra_keys=[None], group_idx=1,
                    kv_cache_spec_kind="mamba"),
        BlockRemoved(block_hashes=[7], medium="GPU", group_idx=1),
        AllBlocksCleared(),
    ],
    data_parallel_rank=0,
)
print(msgspec.msgpack.encode(batch).hex())
# No rank, an integral ts: every positional field is written (nil), the ts as a float64.
print(msgspec.msgpack.encode(KVEventBatch(ts=2.0, events=[])).hex())

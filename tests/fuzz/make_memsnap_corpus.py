#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_memsnap (tests/fuzz/memsnap_corpus): small memory snapshots in
the shape torch.cuda.memory._dump_snapshot writes, pickled with protocols 2-5, and hostile pickles.
Run from the repository root: python3 tests/fuzz/make_memsnap_corpus.py"""
import os
import pickle

out = os.path.join(os.path.dirname(__file__), "memsnap_corpus")
os.makedirs(out, exist_ok=True)
fr = [{"name": "forward", "filename": "/home/me/model.py", "line": 42},
      {"name": "step", "filename": "/venv/lib/python3.12/site-packages/torch/optim/adamw.py", "line": 200}]
seg = 0x7F0000000000
snap = {
    "segments": [{"device": 0, "address": seg, "total_size": 4096, "allocated_size": 612, "active_size": 612,
                  "requested_size": 400, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
                  "is_expandable": False, "frames": [],
                  "blocks": [{"address": seg, "size": 512, "requested_size": 100, "state": "active_allocated", "frames": []},
                             {"address": seg + 512, "size": 512, "requested_size": 300, "state": "active_allocated", "frames": fr},
                             {"address": seg + 1024, "size": 3072, "requested_size": 0, "state": "inactive", "frames": []}]}],
    "device_traces": [[
        {"action": "free_requested", "addr": 0x9000, "size": 50, "stream": 0, "time_us": 1000, "frames": []},
        {"action": "free_completed", "addr": 0x9000, "size": 50, "stream": 0, "time_us": 1001, "frames": []},
        {"action": "alloc", "addr": seg + 512, "size": 300, "stream": 0, "time_us": 1002, "frames": fr},
        {"action": "segment_alloc", "addr": 0xB0000, "size": 2048, "stream": 7, "time_us": 1003, "frames": fr},
        {"action": "alloc", "addr": 0xC000, "size": 1000, "stream": 0, "time_us": 1004, "frames": fr[1:]},
        {"action": "free_completed", "addr": 0xC000, "size": 1000, "stream": 0, "time_us": 1005, "frames": fr[1:]},
        {"action": "segment_free", "addr": 0xB0000, "size": 2048, "stream": 7, "time_us": 1006, "frames": fr},
        {"action": "oom", "addr": 0, "size": 1 << 40, "stream": 0, "time_us": 1007, "device_free": 10},
        {"action": "snapshot", "addr": 0, "size": 0, "stream": 0, "time_us": 1008},
    ], []],
    "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1, "garbage_collection_threshold": 0.5},
    "external_annotations": [{"stage": "START", "name": "FSDP::pre_forward", "device": 0, "time_us": 999},
                             {"stage": "END", "name": "FSDP::pre_forward", "device": 0, "time_us": 1003}],
}
for proto in (2, 3, 4, 5):
    with open(os.path.join(out, f"snapshot_p{proto}.pickle"), "wb") as f:
        pickle.dump(snap, f, protocol=proto)
with open(os.path.join(out, "segments_only.pickle"), "wb") as f:
    pickle.dump({"segments": snap["segments"]}, f, protocol=4)
with open(os.path.join(out, "traces_only.pickle"), "wb") as f:
    pickle.dump({"device_traces": snap["device_traces"]}, f, protocol=4)
hostile = {
    "global_os_system.pickle": b"\x80\x02cos\nsystem\n(S'x'\ntR.",
    "stack_global.pickle": b"\x80\x04\x8c\x02os\x8c\x06system\x93.",
    "deep_lists.pickle": b"\x80\x02" + b"]" * 100 + b"a" * 99 + b".",
    "huge_length.pickle": b"\x80\x04\x8d\xff\xff\xff\xff\xff\xff\xff\x3fabc.",
    "memo_self.pickle": b"\x80\x04]\x94h\x00a.",
    "memo_unset.pickle": b"\x80\x02h\x05.",
    "not_a_dict.pickle": b"\x80\x04]\x94.",
}
for name, data in hostile.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
with open(os.path.join(out, "truncated.pickle"), "wb") as f:
    f.write(pickle.dumps(snap, protocol=4)[:700])

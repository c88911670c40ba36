#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_kineto_import into tests/fuzz/corpus/ (each file < 10 KB).

    tests/fuzz/make_corpus.py BUILD/tests/shardscope-gen-kineto

Hand-written seeds cover the format rules of traces.md §1 and the ways input goes wrong; the
generator-derived seeds are real-looking traces cut down to a few events of every kind.
"""
import gzip
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus")
LIMIT = 10 * 1024


def write(name, data):
    if isinstance(data, str):
        data = data.encode("utf-8")
    assert len(data) < LIMIT, (name, len(data))
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)


def trimmed(gen, args, keep):
    """A generated trace cut to its header, the first events of each (ph, cat) and the tail."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.json")
        subprocess.run([gen, "--events", "400", "--steps", "1", *args, "-o", path], check=True, capture_output=True)
        lines = open(path, encoding="utf-8").read().split("\n")
    start = next(i for i, l in enumerate(lines) if l.strip().startswith('"traceEvents"'))
    end = max(i for i, l in enumerate(lines) if l.strip().startswith("]"))
    head, events, tail = lines[: start + 1], lines[start + 1 : end], lines[end:]
    # deviceProperties lists 8 GPUs: keep one to stay small.
    head = [l if '"deviceProperties"' not in l else l[: l.index("}, {")] + "}]," for l in head]
    seen = {}
    picked = []
    for l in events:
        e = l.strip().rstrip(",")
        key = (e[:40], e.count("nccl"))
        if seen.get(key, 0) < keep and len(picked) < 18:
            seen[key] = seen.get(key, 0) + 1
            picked.append("    " + e)
    return "\n".join(head) + "\n" + ",\n".join(picked) + "\n" + "\n".join(tail)


def main():
    gen = sys.argv[1] if len(sys.argv) > 1 else None
    os.makedirs(OUT, exist_ok=True)
    ev = '{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 100, "dur": 5, "args": {"External id": 1}}'
    k = ('{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "pid": 0, "tid": 7, "ts": 110, '
         '"dur": 20, "args": {"stream": 7, "correlation": 9, "Collective name": "allreduce", "In msg nelems": 1024, '
         '"Out msg nelems": 1024, "Group size": 2, "dtype": "Float", "Process Group Name": "0", '
         '"Process Group Ranks": "[0, 1]"}}')
    rt = ('{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 101, "dur": 3, '
          '"args": {"cbid": 211, "correlation": 9, "External id": 1}}')

    def t(events, extra=""):
        return '{%s"traceEvents": [%s]}' % (extra, ", ".join(events))

    seeds = {
        "minimal_x.json": t([ev]),
        "empty_events.json": t([]),
        "bare_array.json": "[" + ev + ", " + rt + "]",
        "launch_kernel_flow.json": t([ev, rt, k, '{"ph": "s", "id": 9, "pid": 1, "tid": 1, "ts": 101, "cat": "ac2g", "name": "ac2g"}',
                                      '{"ph": "f", "id": 9, "pid": 0, "tid": 7, "ts": 110, "cat": "ac2g", "name": "ac2g", "bp": "e"}']),
        "relative_float_ts.json": t(['{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 5, "tid": 5, '
                                     '"ts": 1365627862757.064, "dur": 87412.863}',
                                     '{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 5, "tid": 5, "ts": 1365627862760.0005, "dur": 0.0004}'],
                                    '"baseTimeNanoseconds": 1767189312000000000, '),
        "base_after_events.json": t([ev]).rstrip("}") + ', "baseTimeNanoseconds": 1767189312000000000}',
        "distributed_current.json": t([ev], '"distributedInfo": {"backend": "nccl", "rank": 1, "world_size": 2, "pg_count": 2, '
                                            '"pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", '
                                            '"pg_size": 2, "ranks": [0, 1]}], "nccl_version": "2.27.5"}, '),
        "distributed_on_demand.json": t([ev], '"distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 2, '
                                              '"pg_config": [{"pg_name": "0", "pg_size": 2, "ranks": "[0, 1]"}], "nccl_version": "unknown"}, '),
        "distributed_old.json": t([ev], '"distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 8}, '),
        "distributed_not_object.json": t([ev], '"distributedInfo": [1, 2], '),
        "metadata_events.json": t([
            '{"name": "process_name", "ph": "M", "ts": 1, "pid": 1, "tid": 0, "args": {"name": "python3"}}',
            '{"name": "process_labels", "ph": "M", "ts": 1, "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}}',
            '{"name": "thread_name", "ph": "M", "ts": 1, "pid": 0, "tid": "stream 7", "args": {"name": "stream 7 "}}',
            '{"name": "thread_name", "ph": "M", "pid": 1, "tid": 1, "args": {"name": 5}}', ev]),
        "memory_instants.json": t([
            '{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 5, "args": '
            '{"Total Reserved": 2097152, "Total Allocated": 512, "Bytes": 512, "Addr": 140000000000, "Device Id": 0, "Device Type": 1}}',
            '{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 6, "args": '
            '{"Total Reserved": 2097152, "Total Allocated": 0, "Bytes": -512, "Addr": "140000000000", "Device Id": 0, "Device Type": 1}}',
            '{"ph": "i", "name": "[OutOfMemory]", "pid": 1, "tid": 1, "ts": 7, "args": {"Bytes": 1e30, "Device Type": "x"}}']),
        "counters_and_flows.json": t([
            '{"ph": "C", "name": "GPU 0 Util", "pid": "GPU 0 Counters", "ts": 1, "args": {"value": 0.5}}',
            '{"ph": "C", "name": "mem", "pid": 1, "ts": 2, "args": {"a": 1, "b": "x", "c": [1]}}',
            '{"ph": "s", "id": "0x1f", "pid": 1, "tid": 1, "ts": 3, "cat": "fwdbwd", "name": "fwdbwd"}',
            '{"ph": "f", "id": "abc", "pid": 1, "tid": 2, "ts": 4, "cat": "fwdbwd", "name": "fwdbwd", "bp": "e"}',
            '{"ph": "t", "id": 3, "pid": 1, "tid": 2, "ts": 4}']),
        "skipped_phases.json": t(['{"ph": "B", "name": "a", "pid": 1, "tid": 1, "ts": 1}', '{"ph": "E", "pid": 1, "tid": 1, "ts": 2}',
                                  '{"ph": "b", "id": 1, "name": "a", "ts": 1}', '{"ph": "O", "id": 1, "name": "o", "ts": 1}', ev]),
        "global_instants.json": t(['{"name": "Iteration Start: PyTorch Profiler", "ph": "i", "s": "g", "pid": "Traces", '
                                   '"tid": "Trace PyTorch Profiler", "ts": 1661203462584767}',
                                   '{"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", "ts": 1661203463125562}',
                                   '{"ph": "X", "cat": "Trace", "ts": 1661203462584767, "dur": 479255, "pid": "Spans", '
                                   '"tid": "PyTorch Profiler", "name": "PyTorch Profiler (0)", "args": {"Op count": 0}}']),
        "old_string_stream_tid.json": t(['{"ph": "X", "cat": "Kernel", "name": "k", "pid": 3, "tid": "stream 7", "ts": 1661203463029566, '
                                         '"dur": 7, "args": {"External id": 5, "correlation": 5, "device": 3}}',
                                         '{"ph": "f", "id": 5, "pid": 3, "tid": "stream 7", "ts": 1661203463029566, '
                                         '"cat": "async_cpu_to_gpu", "name": "async_gpu", "bp": "e"}']),
        "python_functions.json": t(['{"ph": "X", "cat": "python_function", "name": "train.py(10): step", "pid": 1, "tid": 1, '
                                    '"ts": 1, "dur": 50, "args": {"Python parent id": 1, "Python id": 2}}', ev]),
        "step_annotations.json": t(['{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep # 12", "pid": 1, "tid": 1, "ts": 90, "dur": 100}',
                                    '{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#99999999999999999999", "pid": 1, "tid": 1, "ts": 300, "dur": 1}',
                                    ev, rt, k]),
        "unicode_names.json": (b'{"traceEvents": [{"ph": "X", "name": "\\u00e9\\ud83d\\ude00\\ud800\\u0041\\udc00 \\"q\\" \\\\ \\/", '
                               b'"pid": 1, "tid": 1, "ts": 1, "dur": 1}, {"ph": "X", "name": "raw \xc3\xa9 \xff \xed\xa0\x80", '
                               b'"pid": 1, "tid": 1, "ts": 2, "dur": 1}]}'),
        "numbers_edge.json": t(['{"ph": "X", "name": "a", "pid": -1, "tid": 0, "ts": 0.0000001, "dur": 1E+2}',
                                '{"ph": "X", "name": "b", "pid": 1.0, "tid": 1e3, "ts": 4600000000000000, "dur": 0}',
                                '{"ph": "X", "name": "c", "pid": 9223372036854775807, "tid": -9223372036854775808, "ts": -1, "dur": -5}',
                                '{"ph": "X", "name": "d", "pid": 1, "tid": 1, "ts": 1, "dur": 1, "args": {"stream": -1, "correlation": 1.5, "External id": "7"}}']),
        "huge_numbers.json": t(['{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1e300, "dur": 1}']),
        "negative_duration.json": t(['{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 10, "dur": -5}']),
        "wrong_types.json": t(['{"ph": "X", "name": "a", "pid": {"x": 1}, "tid": 1, "ts": "1", "dur": 1}']),
        "traceevents_object.json": '{"traceEvents": {"ph": "X"}}',
        "not_a_trace.json": '{"foo": 1, "bar": [1, 2, 3], "baz": {"a": null}}',
        "top_level_array_numbers.json": "[1, 2, 3]",
        "top_level_string.json": '"str"',
        "top_level_number_ws.json": "   123",
        "truncated.json": t([ev, rt, k])[:150],
        "truncated_after_number.json": '{"traceEvents": [{"ph": "X", "ts": 12',
        "deep_nesting.json": '{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "args": {"x": ' + "[" * 300 + "]" * 300 + "}}]}",
        "deep_unclosed.json": '{"traceEvents": [{"ph": "X", "args": {"x": ' + "[{\"a\":" * 200,
        "bad_escapes.json": t(['{"ph": "X", "name": "a\\qb\\u12G4", "pid": 1, "tid": 1, "ts": 1}']),
        "lone_surrogate_end.json": '"\\ud800"',
        "trailing_garbage.json": t([ev]) + " }",
        "trailing_comma.json": '{"traceEvents": [' + ev + ", ]}",
        "control_bytes.json": t([ev]).replace("aten::mm", "aten\x01\x1f::mm"),
        "bom.json": "\ufeff" + t([ev]),
        "whitespace_only.json": " \n\t\r ",
        "empty.json": "",
        "long_string.json": t(['{"ph": "X", "name": "' + "n" * 5000 + '", "pid": 1, "tid": 1, "ts": 1}']),
        "many_keys.json": t(['{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "args": {'
                             + ", ".join('"k%d": %d' % (i, i) for i in range(300)) + "}}"]),
        "duplicate_keys.json": t(['{"ph": "X", "ph": "i", "name": "a", "name": 5, "pid": 1, "tid": 1, "ts": 1, "ts": 2}']),
        "cuda_sync.json": t(['{"ph": "X", "cat": "cuda_sync", "name": "Stream Sync", "pid": 0, "tid": 1000007, "ts": 5, "dur": 3, '
                             '"args": {"stream": 1000007, "correlation": 4}}',
                             '{"ph": "X", "cat": "gpu_user_annotation", "name": "nccl:all_reduce", "pid": 0, "tid": 7, "ts": 4, "dur": 9}']),
    }
    for name, data in seeds.items():
        write(name, data)
    write("gzip_small.json.gz", gzip.compress(t([ev, rt, k]).encode(), mtime=0))
    write("gzip_two_members.json.gz", gzip.compress(b'{"traceEvents": [', mtime=0) + gzip.compress((ev + "]}").encode(), mtime=0))
    write("gzip_truncated.json.gz", gzip.compress(t([ev, rt, k] * 5).encode(), mtime=0)[:60])
    write("gzip_garbage_after.json.gz", gzip.compress(t([ev]).encode(), mtime=0) + b"\x00\x00garbage")

    if gen:
        write("gen_new_format.json", trimmed(gen, ["--world", "4", "--rank", "1"], 1))
        write("gen_old_format.json", trimmed(gen, ["--old-format", "--world", "2"], 1))
        write("gen_python.json", trimmed(gen, ["--python", "--no-memory"], 1))
        small = trimmed(gen, ["--world", "8"], 1)
        write("gen_indent.json", json.dumps(json.loads(small), indent=4)[:9800])  # json.dump(indent=4) layout, cut short
    print("wrote", len(os.listdir(OUT)), "seeds to", OUT)


if __name__ == "__main__":
    main()

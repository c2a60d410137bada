#!/usr/bin/python3
"""tensorboard_events.py [--tensorboard] [--shown] DIR_OR_FILE...: the records of TensorBoard event
files, one JSON object a line:
  {"file_version": "brain.Event:2"}
  {"step": N, "wall_time": T, "session_log": "START"}                  a restart (SessionLog)
  {"step": N, "wall_time": T, "tag": "...", "value": V}                 a scalar (simple_value)
  {"step": N, "wall_time": T, "tag": "...", "histogram": {"min", "max", "num", "sum",
   "sum_squares", "bucket_limit": [...], "bucket": [...]}}              a histogram (histo)
A NaN or infinite value prints as Python's json writes it (NaN, Infinity). Other summary kinds
(images, tensors) and other Event fields are skipped.

--shown prints the scalars alone, as TensorBoard shows them: a SessionLog START at step S drops
every point read before it whose step is S or later (TensorBoard's purge of orphaned data, for
files of file_version 2). With --tensorboard it is TensorBoard's own EventAccumulator that reads
the run and drops them.

A DIR stands for the event files directly in it ("tfevents" in the name, as TensorBoard finds
them), in name order: one run, as TensorBoard reads it; its subfolders are other runs.

By default the files are decoded here, with the standard library alone, by the published format
(TFRecord framing around tensorflow/core/util/event.proto; train/loop/tensorboard_record.h): every
masked CRC-32C is checked, and a corrupt or truncated record exits 1 naming the file and offset.
--tensorboard reads them with TensorBoard's own loader instead (the events as stored, before its
conversion to tensor summaries; or TensorFlow's reader, where only that is installed) and prints
the same lines; exit 3 when neither can be imported. That loader stops quietly at a corrupt
record, as TensorBoard does: only the default decoder fails on one.
Exit 2: a path that does not exist, or a DIR without event files."""
import argparse
import json
import os
import signal
import struct
import sys


class Corrupt(Exception):
    pass


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for byte in data:
        c = _TABLE[(c ^ byte) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked_crc32c(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def tfrecords(path):
    """(offset, data) of each record of the file, its two CRCs checked."""
    with open(path, "rb") as f:
        buf = f.read()
    at = 0
    while at < len(buf):
        if len(buf) - at < 12:
            raise Corrupt(f"{path}: offset {at}: truncated record header ({len(buf) - at} bytes)")
        (length,) = struct.unpack_from("<Q", buf, at)
        (length_crc,) = struct.unpack_from("<I", buf, at + 8)
        if masked_crc32c(buf[at : at + 8]) != length_crc:
            raise Corrupt(f"{path}: offset {at}: the CRC of the record's length does not match")
        if len(buf) - at - 12 < length + 4:
            raise Corrupt(f"{path}: offset {at}: truncated record ({length} bytes of data announced)")
        data = buf[at + 12 : at + 12 + length]
        (data_crc,) = struct.unpack_from("<I", buf, at + 12 + length)
        if masked_crc32c(data) != data_crc:
            raise Corrupt(f"{path}: offset {at}: the CRC of the record's data does not match")
        yield at, data
        at += 12 + length + 4


def _varint(buf, at):
    value, shift = 0, 0
    while True:
        if at >= len(buf):
            raise ValueError("varint runs past the end")
        byte = buf[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7
        if shift >= 70:
            raise ValueError("varint longer than 10 bytes")


def fields(buf):
    """(number, wire type, value) of each field of a serialized message: an int for varints,
    bytes for fixed32, fixed64 and length-delimited fields."""
    out, at = [], 0
    while at < len(buf):
        key, at = _varint(buf, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = _varint(buf, at)
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            if len(buf) - at < size:
                raise ValueError(f"field {number} runs past the end")
            value, at = buf[at : at + size], at + size
        elif wire == 2:
            size, at = _varint(buf, at)
            if len(buf) - at < size:
                raise ValueError(f"field {number} runs past the end")
            value, at = buf[at : at + size], at + size
        else:
            raise ValueError(f"field {number} has wire type {wire}")
        out.append((number, wire, value))
    return out


def _double(wire, value):
    if wire != 1:
        raise ValueError(f"a double field has wire type {wire}")
    return struct.unpack("<d", value)[0]


def _doubles(wire, value):
    """A repeated double: packed (one length-delimited field) or one field per element."""
    if wire == 2:
        if len(value) % 8:
            raise ValueError("packed doubles of a length not a multiple of 8")
        return list(struct.unpack(f"<{len(value) // 8}d", value))
    return [_double(wire, value)]


def _histogram(buf):
    h = {"min": 0.0, "max": 0.0, "num": 0.0, "sum": 0.0, "sum_squares": 0.0, "bucket_limit": [], "bucket": []}
    names = {1: "min", 2: "max", 3: "num", 4: "sum", 5: "sum_squares"}
    for number, wire, value in fields(buf):
        if number in names:
            h[names[number]] = _double(wire, value)
        elif number == 6:
            h["bucket_limit"] += _doubles(wire, value)
        elif number == 7:
            h["bucket"] += _doubles(wire, value)
    return h


def decode_event(buf):
    """The JSON objects of one serialized Event."""
    wall_time, step, version, values, status = 0.0, 0, None, [], None
    for number, wire, value in fields(buf):
        if number == 1:
            wall_time = _double(wire, value)
        elif number == 2 and wire == 0:
            step = value - (1 << 64) if value >= 1 << 63 else value  # int64
        elif number == 3 and wire == 2:
            version = value.decode("utf-8")
        elif number == 5 and wire == 2:
            for v_number, v_wire, v_value in fields(value):
                if v_number == 1 and v_wire == 2:
                    values.append(v_value)
        elif number == 6 and wire == 2:
            status = 0
            for s_number, s_wire, s_value in fields(value):
                if s_number == 1 and s_wire == 0:
                    status = s_value
    if version is not None:
        yield {"file_version": version}
    if status is not None:
        yield {"step": step, "wall_time": wall_time, "session_log": SESSION_STATUS.get(status, str(status))}
    for value in values:
        tag, line = "", None
        for number, wire, v in fields(value):
            if number == 1 and wire == 2:
                tag = v.decode("utf-8")
            elif number == 2 and wire == 5:
                line = {"value": struct.unpack("<f", v)[0]}
            elif number == 5 and wire == 2:
                line = {"histogram": _histogram(v)}
        if line is not None:
            yield {"step": step, "wall_time": wall_time, "tag": tag, **line}


SESSION_STATUS = {0: "STATUS_UNSPECIFIED", 1: "START", 2: "STOP", 3: "CHECKPOINT"}


def shown(lines):
    """The scalar points of a run's decoded lines as TensorBoard shows them: each SessionLog START
    at step S drops the points before it at step S or later."""
    points = []
    for line in lines:
        if line.get("session_log") == "START":
            points = [p for p in points if p["step"] < line["step"]]
        elif "value" in line:
            points.append(line)
    return points


def shown_by_tensorboard(folder):
    """The same by TensorBoard's EventAccumulator over the run's folder; None where TensorBoard is
    not installed."""
    try:
        from tensorboard.backend.event_processing import event_accumulator
    except ImportError:
        return None
    run = event_accumulator.EventAccumulator(folder, size_guidance={event_accumulator.SCALARS: 0},
                                             purge_orphaned_data=True)
    run.Reload()
    return [{"step": e.step, "wall_time": e.wall_time, "tag": tag, "value": e.value}
            for tag in run.Tags()["scalars"] for e in run.Scalars(tag)]


def decode_file(path):
    for offset, data in tfrecords(path):
        try:
            yield from decode_event(data)
        except (ValueError, UnicodeDecodeError, struct.error) as e:
            raise Corrupt(f"{path}: offset {offset}: not an Event: {e}") from None


def _tensorboard_events():
    """A function from a path to its Event protos, by TensorBoard's loader or TensorFlow's
    reader; None when neither is installed."""
    try:
        from tensorboard.backend.event_processing import event_file_loader
    except ImportError:
        pass
    else:
        # The events as stored: since TensorBoard 2.3 EventFileLoader turns simple_value and
        # histo into tensor summaries, and LegacyEventFileLoader is what EventFileLoader was.
        loader = getattr(event_file_loader, "LegacyEventFileLoader", event_file_loader.EventFileLoader)
        return lambda path: loader(path).Load()
    try:
        import tensorflow as tf
        from tensorflow.core.util import event_pb2

        return lambda path: (event_pb2.Event.FromString(r.numpy()) for r in tf.data.TFRecordDataset(path))
    except ImportError:
        return None


def decode_file_by_tensorboard(events, path):
    for event in events(path):
        if event.WhichOneof("what") == "file_version":
            yield {"file_version": event.file_version}
        if event.HasField("session_log"):
            status = SESSION_STATUS.get(event.session_log.status, str(event.session_log.status))
            yield {"step": event.step, "wall_time": event.wall_time, "session_log": status}
        if not event.HasField("summary"):
            continue
        for value in event.summary.value:
            kind = value.WhichOneof("value")
            head = {"step": event.step, "wall_time": event.wall_time, "tag": value.tag}
            if kind == "simple_value":
                yield {**head, "value": value.simple_value}
            elif kind == "histo":
                h = value.histo
                yield {
                    **head,
                    "histogram": {
                        "min": h.min,
                        "max": h.max,
                        "num": h.num,
                        "sum": h.sum,
                        "sum_squares": h.sum_squares,
                        "bucket_limit": list(h.bucket_limit),
                        "bucket": list(h.bucket),
                    },
                }


def event_files(arg):
    if os.path.isdir(arg):
        names = sorted(n for n in os.listdir(arg) if "tfevents" in n)
        files = [os.path.join(arg, n) for n in names if os.path.isfile(os.path.join(arg, n))]
        if not files:
            raise FileNotFoundError(f"{arg}: no event files (tfevents) in this folder")
        return files
    if not os.path.isfile(arg):
        raise FileNotFoundError(f"{arg}: no such file or folder")
    return [arg]


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet when the reader (head) stops early
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tensorboard", action="store_true", help="read with TensorBoard's own loader")
    parser.add_argument("--shown", action="store_true", help="the scalars as TensorBoard shows them")
    parser.add_argument("paths", nargs="+", metavar="DIR_OR_FILE")
    args = parser.parse_args()
    if args.shown and args.tensorboard:
        points = []
        for arg in args.paths:
            if not os.path.isdir(arg):
                print(f"tensorboard_events.py: --shown --tensorboard reads runs: {arg} is no folder", file=sys.stderr)
                return 2
            got = shown_by_tensorboard(arg)
            if got is None:
                print("tensorboard_events.py: tensorboard is not installed", file=sys.stderr)
                return 3
            points += got
        for p in points:
            print(json.dumps(p))
        return 0
    decode = decode_file
    if args.tensorboard:
        events = _tensorboard_events()
        if events is None:
            print("tensorboard_events.py: tensorboard is not installed", file=sys.stderr)
            return 3
        decode = lambda path: decode_file_by_tensorboard(events, path)  # noqa: E731
    try:
        files = [f for arg in args.paths for f in event_files(arg)]
    except FileNotFoundError as e:
        print(f"tensorboard_events.py: {e}", file=sys.stderr)
        return 2
    try:
        if args.shown:
            for line in shown(line for path in files for line in decode(path)):
                print(json.dumps(line))
            return 0
        for path in files:
            for line in decode(path):
                print(json.dumps(line))
    except Corrupt as e:
        sys.stdout.flush()
        print(f"tensorboard_events.py: corrupt record: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

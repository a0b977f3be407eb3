#!/usr/bin/env python3
"""Generates the gpujoin example dataset (fixed seed; the outputs are committed).

sensors.csv   500 sensors with sparse, random 32-bit IDs (a dimension table)
events.csv    4000 telemetry events referring to sensors by ID; about 3% refer to
              IDs that are not in sensors.csv (decommissioned sensors), some
              latencies are missing (empty cells)
probe_ids.u32 1000 sensor IDs as raw little-endian uint32 (for .u32 input)

Run from anywhere:  python3 examples/generate.py
"""
import csv
import os
import random
import struct

SEED = 20261130
HERE = os.path.dirname(os.path.abspath(__file__))

TYPES = ["temperature", "humidity", "pressure", "co2", "vibration"]
# Typical sample latency of each sensor type in milliseconds (mean, spread).
LATENCY = {"temperature": (12.0, 3.0), "humidity": (18.0, 4.0), "pressure": (9.0, 2.0),
           "co2": (35.0, 8.0), "vibration": (4.0, 1.0)}
READING = {"temperature": (21.0, 4.0), "humidity": (45.0, 10.0), "pressure": (1013.0, 8.0),
           "co2": (600.0, 150.0), "vibration": (0.3, 0.1)}
SITES = ["plant-a", "plant-b", "warehouse", "office"]
ROOMS = ["Boiler room, north", "Boiler room, south", "Line 1", "Line 2", "Cold store",
         "Server room", "Lobby", 'Dock "B"']


def main():
    rng = random.Random(SEED)
    ids = set()
    while len(ids) < 520:
        v = rng.randrange(1, 0xFFFFFFFF)  # never the reserved key 0xffffffff
        ids.add(v)
    ids = sorted(ids)
    rng.shuffle(ids)
    sensor_ids, retired_ids = ids[:500], ids[500:]

    sensors = []
    for sid in sensor_ids:
        t = rng.choice(TYPES)
        sensors.append({
            "sensor_id": sid,
            "type": t,
            "site": rng.choice(SITES),
            "room": rng.choice(ROOMS),
            "installed": "20%02d-%02d-%02d" % (rng.randrange(18, 26), rng.randrange(1, 13),
                                                rng.randrange(1, 29)),
        })
    by_id = {s["sensor_id"]: s for s in sensors}

    with open(os.path.join(HERE, "sensors.csv"), "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["sensor_id", "type", "site", "room", "installed"])
        for s in sensors:
            w.writerow([s["sensor_id"], s["type"], s["site"], s["room"], s["installed"]])

    # Some sensors are busier than others.
    weights = [rng.paretovariate(1.5) for _ in sensor_ids]
    t0 = 1764460800  # 2025-11-30T00:00:00Z
    with open(os.path.join(HERE, "events.csv"), "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["event_id", "sensor_id", "ts", "latency_ms", "reading", "ok"])
        for e in range(4000):
            if rng.random() < 0.03:
                sid = rng.choice(retired_ids)
                t = rng.choice(TYPES)
            else:
                sid = rng.choices(sensor_ids, weights)[0]
                t = by_id[sid]["type"]
            mu, sd = LATENCY[t]
            latency = max(0.5, rng.gauss(mu, sd))
            rmu, rsd = READING[t]
            reading = rng.gauss(rmu, rsd)
            ok = 0 if rng.random() < 0.05 else 1
            ts = t0 + e * 15 + rng.randrange(15)
            lat_text = "" if rng.random() < 0.01 else "%.3f" % latency
            w.writerow([100000 + e, sid, ts, lat_text, "%.4f" % reading, ok])

    with open(os.path.join(HERE, "probe_ids.u32"), "wb") as f:
        for _ in range(1000):
            sid = rng.choice(retired_ids) if rng.random() < 0.1 else rng.choice(sensor_ids)
            f.write(struct.pack("<I", sid))


if __name__ == "__main__":
    main()

# Tracer benchmark: a "realistic program" workload for Debian's python3 (run with a fixed
# PYTHONHASHSEED): builds, sorts, indexes and drops dicts, lists, strings and small objects.
# Usage: python3 python_workload.py [SCALE]. Prints a checksum that does not depend on addresses.
import sys


class Point:
    __slots__ = ("x", "y", "label")

    def __init__(self, x, y, label):
        self.x = x
        self.y = y
        self.label = label


def main():
    scale = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
    rounds = max(1, int(3 * scale))
    state = 12345
    checksum = 0
    for _ in range(rounds):
        index = {}
        points = []
        for i in range(60000):
            state = (state * 6364136223846793005 + 1442695040888963407) & (2**64 - 1)
            key = "k%x" % (state >> 44)
            index.setdefault(key, []).append(i)
            points.append(Point(i, state >> 50, key * (1 + i % 3)))
        words = sorted(index, key=lambda k: (len(index[k]), k))
        joined = ",".join(words[:2000])
        groups = {}
        for p in points:
            groups.setdefault(p.y % 101, []).append(p.label)
        checksum += len(joined) + sum(len(v) for v in groups.values()) + len(words)
        del points, groups, index
    print("python_workload: checksum", checksum)


main()

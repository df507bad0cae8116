"""``memorybank bench``: latency, throughput and memory at several sizes, side by side with the
original design, LangChain classic and mem0 (see :mod:`memory_bank.bench.runner`).

The command line is :mod:`memory_bank.bench.cli`; importing this package imports nothing.

    memorybank bench --json bench.json --chart bench.png          # default sizes, about 15 min
    memorybank bench --quick --json quick.json                    # seconds, hashing encoder
"""

"""16 threads, each with its own in-memory sqlite3 database: insert, index,
query. Prints one deterministic line per thread, in thread order.

20,000 rows a thread: about 50 ms of CPU time each (5,000 rows were about
10 ms, five 2 ms periods: on a loaded machine, where the CPU-time timer is
checked only at the ticks a thread is running, a worker could end before
its first sample and get no profile, and the test wants all 17)."""
import sqlite3
import threading

results = [None] * 16


def work(n):
    db = sqlite3.connect(":memory:")
    db.execute("create table t (k integer, v text)")
    db.executemany("insert into t values (?, ?)", ((i * 7919 % 5000, str(i) * 3) for i in range(20000)))
    db.execute("create index ik on t(k)")
    total = db.execute("select sum(k), count(distinct v) from t where k % ? = 0", (n + 1,)).fetchone()
    results[n] = total
    db.close()


threads = [threading.Thread(target=work, args=(n,)) for n in range(16)]
for t in threads:
    t.start()
for t in threads:
    t.join()
for n, r in enumerate(results):
    print(n, r[0], r[1])

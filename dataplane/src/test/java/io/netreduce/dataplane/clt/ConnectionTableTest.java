package io.netreduce.dataplane.clt;

import io.netreduce.protocol.testing.SeededCases;
import org.junit.jupiter.api.Test;

import java.net.InetAddress;
import java.util.HashMap;
import java.util.SplittableRandom;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;

class ConnectionTableTest
{
    @Test
    void shouldKeepIpv4AndIpv6KeysApart() throws Exception
    {
        final ConnectionTable table = new ConnectionTable(16);
        final InetAddress v4 = InetAddress.getByName("10.0.0.1");
        final InetAddress v6 = InetAddress.getByName("fd00::1");
        final int a = table.insert(IpKey.high(v4), IpKey.low(v4), IpKey.high(v6), IpKey.low(v6), 7,
            ConnectionTable.KIND_RING);
        assertThat(table.find(IpKey.high(v4), IpKey.low(v4), IpKey.high(v6), IpKey.low(v6), 7)).isEqualTo(a);
        assertThat(table.find(IpKey.high(v6), IpKey.low(v6), IpKey.high(v4), IpKey.low(v4), 7)).isEqualTo(-1);
        assertThat(table.find(IpKey.high(v4), IpKey.low(v4), IpKey.high(v6), IpKey.low(v6), 8)).isEqualTo(-1);
        assertThat(IpKey.toAddress(table.srcHigh(a), table.srcLow(a))).isEqualTo(v4);
        assertThat(IpKey.toAddress(table.dstHigh(a), table.dstLow(a))).isEqualTo(v6);
    }

    @Test
    void shouldReportFullAtItsLimit()
    {
        final ConnectionTable table = new ConnectionTable(3);
        for (int qp = 0; qp < 3; qp++)
        {
            assertThat(table.insert(0, 1, 0, 2, qp, ConnectionTable.KIND_RING)).isNotNegative();
        }
        assertThat(table.insert(0, 1, 0, 2, 99, ConnectionTable.KIND_RING)).isEqualTo(-1);
    }

    @Test
    void shouldHoldForeignEntriesWithinTheirShareInTotalAndPerSource()
    {
        final ConnectionTable table = new ConnectionTable(16, 6, 4);
        for (int qp = 0; qp < 4; qp++)
        {
            assertThat(table.insert(0, 1, 0, 2, qp, ConnectionTable.KIND_FOREIGN)).isNotNegative();
        }
        assertThat(table.insert(0, 1, 0, 2, 4, ConnectionTable.KIND_FOREIGN)).as("source 1 at its share")
            .isEqualTo(ConnectionTable.SOURCE_LIMIT);
        assertThat(table.insert(0, 3, 0, 2, 0, ConnectionTable.KIND_FOREIGN)).isNotNegative();
        assertThat(table.insert(0, 3, 0, 2, 1, ConnectionTable.KIND_FOREIGN)).isNotNegative();
        assertThat(table.insert(0, 4, 0, 2, 0, ConnectionTable.KIND_FOREIGN)).as("the total share")
            .isEqualTo(ConnectionTable.FOREIGN_LIMIT);
        assertThat(table.foreignCount()).isEqualTo(6);
        for (int qp = 0; qp < 10; qp++)
        {
            assertThat(table.insert(0, 5, 0, 6, qp, ConnectionTable.KIND_RING)).as("ring entries: the rest")
                .isNotNegative();
        }
        assertThat(table.insert(0, 5, 0, 6, 99, ConnectionTable.KIND_RING)).isEqualTo(ConnectionTable.FULL);

        // Removal, expiry and a foreign entry turned into a ring one give the share back.
        table.removeAt(table.find(0, 1, 0, 2, 0));
        table.setRing(table.find(0, 1, 0, 2, 1), 1, 0, 0, 0, 1);
        assertThat(table.foreignCount()).isEqualTo(4);
        assertThat(table.foreignCount(0, 1)).isEqualTo(2);
        table.removeAt(table.find(0, 5, 0, 6, 0));
        assertThat(table.insert(0, 1, 0, 2, 7, ConnectionTable.KIND_FOREIGN)).isNotNegative();
        assertThat(table.foreignCount(0, 1)).isEqualTo(3);
        int expired = 0;
        for (int sweep = 0; sweep < 3; sweep++)
        {
            expired += table.expireForeign(Long.MAX_VALUE, 1, table.capacity());
        }
        assertThat(expired).isEqualTo(5);
        assertThat(table.foreignCount()).isZero();
        assertThat(table.foreignCount(0, 1)).isZero();
        assertThat(table.foreignCount(0, 3)).isZero();
    }

    @Test
    void shouldCountForeignEntriesPerSourceThroughAnyInsertsAndRemovals()
    {
        SeededCases.run("CLT foreign shares", 200, (random, index) ->
        {
            final ConnectionTable table = new ConnectionTable(256, 64, 8);
            final Map<Integer, Integer> perSource = new HashMap<>();
            int total = 0;
            for (int op = 0; op < 400; op++)
            {
                final int source = random.nextInt(20);
                final int qp = random.nextInt(40);
                final int slot = table.find(0, source, 0, 99, qp);
                if (slot >= 0)
                {
                    if (table.kind(slot) == ConnectionTable.KIND_FOREIGN)
                    {
                        perSource.merge(source, -1, Integer::sum);
                        total--;
                    }
                    table.removeAt(slot);
                    continue;
                }
                final int inserted = table.insert(0, source, 0, 99, qp, ConnectionTable.KIND_FOREIGN);
                final int held = perSource.getOrDefault(source, 0);
                if (total >= 64)
                {
                    assertThat(inserted).isEqualTo(ConnectionTable.FOREIGN_LIMIT);
                }
                else if (held >= 8)
                {
                    assertThat(inserted).isEqualTo(ConnectionTable.SOURCE_LIMIT);
                }
                else
                {
                    assertThat(inserted).isNotNegative();
                    perSource.merge(source, 1, Integer::sum);
                    total++;
                }
            }
            assertThat(table.foreignCount()).isEqualTo(total);
            for (int source = 0; source < 20; source++)
            {
                assertThat(table.foreignCount(0, source)).as("source %d", source)
                    .isEqualTo(perSource.getOrDefault(source, 0));
            }
        });
    }

    @Test
    void shouldEvictAForeignOrAStaleEntryButNeverACurrentRingConnection()
    {
        final ConnectionTable table = new ConnectionTable(4);
        for (int qp = 0; qp < 3; qp++)
        {
            table.setRing(table.insert(0, 1, 0, 2, qp, ConnectionTable.KIND_RING), 1, 0, 0, 0, qp);
        }
        table.insert(0, 1, 0, 2, 3, ConnectionTable.KIND_FOREIGN);
        final ConnectionTable.StaleTest generationTwoIsCurrent = (ring, rank, generation) -> generation != 2;
        assertThat(table.evict(generationTwoIsCurrent)).isTrue();
        assertThat(table.evict(generationTwoIsCurrent)).isTrue();
        assertThat(table.evict(generationTwoIsCurrent)).isTrue();
        assertThat(table.evict(generationTwoIsCurrent)).as("only the current connection is left").isFalse();
        assertThat(table.size()).isEqualTo(1);
        assertThat(table.generation(table.find(0, 1, 0, 2, 2))).isEqualTo(2);
        assertThat(table.foreignCount()).isZero();
    }

    @Test
    void shouldFindEveryEntryAfterAnyInsertsAndRemovals()
    {
        SeededCases.run("CLT inserts and removals", 200, (random, index) -> checkInsertsAndRemovals(random));
    }

    private static void checkInsertsAndRemovals(final SplittableRandom random)
    {
        final int[] keys = random.ints(random.nextInt(61), 0, 41).toArray();
        final int[] removals = random.ints(random.nextInt(61), 0, 41).toArray();
        final ConnectionTable table = new ConnectionTable(64);
        final Map<Integer, Integer> model = new HashMap<>();
        for (final int key : keys)
        {
            if (table.find(0, key, 0, key * 31L, key) < 0)
            {
                final int slot = table.insert(0, key, 0, key * 31L, key, ConnectionTable.KIND_RING);
                table.setRing(slot, key, key % 7, key, key * 3, 1);
                model.put(key, key * 3);
            }
        }
        for (final int key : removals)
        {
            final int slot = table.find(0, key, 0, key * 31L, key);
            if (slot >= 0)
            {
                table.removeAt(slot);
                model.remove(key);
            }
        }
        assertThat(table.size()).isEqualTo(model.size());
        for (int key = 0; key <= 40; key++)
        {
            final int slot = table.find(0, key, 0, key * 31L, key);
            if (model.containsKey(key))
            {
                assertThat(slot).isNotNegative();
                assertThat(table.psn0(slot)).isEqualTo(model.get(key));
                assertThat(table.ring(slot)).isEqualTo(key);
            }
            else
            {
                assertThat(slot).isEqualTo(-1);
            }
        }
    }

    @Test
    void shouldExpireIdleForeignEntriesAndKeepBusyOnesAndRingEntries()
    {
        final ConnectionTable clt = new ConnectionTable(5000);
        final FlowKey key = new FlowKey();
        for (int i = 0; i < 4000; i++)
        {
            final int slot = clt.insert(key.set(1, i, 2, i, i), ConnectionTable.KIND_FOREIGN);
            clt.touch(slot, i % 2 == 0 ? 1_000 : 50_000);
        }
        final int ring = clt.insert(key.set(7, 7, 8, 8, 9), ConnectionTable.KIND_RING);
        clt.setRing(ring, 1, 0, 0, 0, 1);

        int removed = 0;
        for (int sweep = 0; sweep < 100; sweep++)
        {
            removed += clt.expireForeign(60_000, 20_000, 256);
        }

        assertThat(removed).as("the 2000 idle foreign entries").isEqualTo(2000);
        assertThat(clt.size()).isEqualTo(2001);
        for (int i = 0; i < 4000; i++)
        {
            assertThat(clt.find(key.set(1, i, 2, i, i)) >= 0).as("entry %d", i).isEqualTo(i % 2 == 1);
        }
        assertThat(clt.find(key.set(7, 7, 8, 8, 9))).as("ring entry").isGreaterThanOrEqualTo(0);
    }

    @Test
    void shouldExpireReplacedRingEntriesOnlyOnceIdleAndKeepCurrentAndForeignOnes()
    {
        final ConnectionTable clt = new ConnectionTable(4096);
        final FlowKey key = new FlowKey();
        // Rank 0 of ring 1 opened a new connection (generation) per call, 500 calls: only generation 499 is current.
        for (int generation = 0; generation < 500; generation++)
        {
            final int slot = clt.insert(key.set(1, 1, 2, 2, 100 + generation), ConnectionTable.KIND_RING);
            clt.setRing(slot, 1, 0, 0, 0, generation);
            clt.touch(slot, generation < 400 ? 1_000 : 50_000); // the last 100 were busy recently
        }
        final int foreign = clt.insert(key.set(3, 3, 4, 4, 5), ConnectionTable.KIND_FOREIGN);
        clt.touch(foreign, 1_000);
        final ConnectionTable.StaleTest replaced = (ring, rank, generation) -> generation != 499;

        int removed = 0;
        for (int sweep = 0; sweep < 100; sweep++)
        {
            removed += clt.expireStale(60_000, 20_000, 128, replaced);
        }

        assertThat(removed).as("the 400 replaced entries idle for longer than 20 us").isEqualTo(400);
        assertThat(clt.size()).as("99 replaced but recently busy, the current one, the foreign one").isEqualTo(101);
        for (int generation = 0; generation < 500; generation++)
        {
            assertThat(clt.find(key.set(1, 1, 2, 2, 100 + generation)) >= 0).as("generation %d", generation)
                .isEqualTo(generation >= 400);
        }
        assertThat(clt.find(key.set(3, 3, 4, 4, 5))).as("foreign entries are expireForeign's").isNotNegative();
    }
}

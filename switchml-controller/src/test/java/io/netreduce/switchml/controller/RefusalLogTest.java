package io.netreduce.switchml.controller;

import org.junit.jupiter.api.Test;

import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A host that reaches the controller and calls it 1,000 times with a refused session used to get 1,000 WARN lines.
 */
class RefusalLogTest
{
    @Test
    void shouldLogAFewRefusalsPerPeerAMinuteThenSayHowManyWereNot()
    {
        final long[] now = { 0 };
        final List<String> lines = new ArrayList<>();
        final RefusalLog log = new RefusalLog(() -> now[0], lines::add);
        final InetSocketAddress stranger = new InetSocketAddress("10.9.9.9", 40000);
        final InetSocketAddress worker = new InetSocketAddress("10.77.0.1", 40000);
        for (int i = 0; i < 1_000; i++)
        {
            log.refused(stranger, () -> "refused stranger");
        }
        log.refused(worker, () -> "refused worker");
        assertThat(lines).hasSize(RefusalLog.LINES_PER_PEER + 1).endsWith("refused worker");

        lines.clear();
        now[0] = RefusalLog.WINDOW_NS;
        log.refused(stranger, () -> "refused stranger again");
        assertThat(lines).containsExactly(
            "SwitchML controller: " + (1_000 - RefusalLog.LINES_PER_PEER) + " more refused call(s) from 10.9.9.9 in " +
                "the last 60 s were not logged one by one",
            "refused stranger again");
    }
}

package io.netreduce.daemon;

import io.netreduce.dataplane.counters.DataplaneCounter;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The drop-burst warning on a manual clock: one line per interval naming each reason that increased, nothing
 * when nothing was dropped, nothing between intervals however often it is asked.
 */
class DropBurstWatcherTest
{
    private static final long SECOND = TimeUnit.SECONDS.toNanos(1);

    private final Map<DataplaneCounter, Long> counters = new EnumMap<>(DataplaneCounter.class);
    private final List<String> lines = new ArrayList<>();
    private long now = 5 * SECOND;

    private DropBurstWatcher watcher()
    {
        return new DropBurstWatcher(counter -> counters.getOrDefault(counter, 0L), () -> now, SECOND, lines::add);
    }

    private void add(final DataplaneCounter counter, final long delta)
    {
        counters.merge(counter, delta, Long::sum);
    }

    @Test
    void shouldWarnOnceAnIntervalWithEveryReasonThatIncreasedLargestFirst()
    {
        add(DataplaneCounter.DROP_BAD_ICRC, 7); // before the watcher started: not a burst it saw
        final DropBurstWatcher watcher = watcher();
        add(DataplaneCounter.DROP_BAD_ICRC, 12);
        add(DataplaneCounter.DROP_FIRST_PACKET_LOST, 1532);
        add(DataplaneCounter.FRAMES_RECEIVED, 99_999); // not a drop

        now += SECOND;
        assertThat(watcher.tick()).isEqualTo("ring traffic dropped: 1532 first packet lost, 12 bad icrc in the last 1.0 s");

        assertThat(lines).containsExactly("ring traffic dropped: 1532 first packet lost, 12 bad icrc in the last 1.0 s");
    }

    @Test
    void shouldStaySilentBetweenIntervalsAndWhenNothingWasDropped()
    {
        final DropBurstWatcher watcher = watcher();
        now += SECOND;
        assertThat(watcher.tick()).isNull();

        for (int i = 0; i < 900; i++)
        {
            add(DataplaneCounter.DROP_STALE_PACKET, 1);
            now += SECOND / 1000;
            watcher.tick();
        }
        assertThat(lines).isEmpty();

        now += SECOND / 10;
        assertThat(watcher.tick()).isEqualTo("ring traffic dropped: 900 stale packet in the last 1.0 s");
        now += SECOND;
        assertThat(watcher.tick()).isNull();
        assertThat(lines).hasSize(1);
    }

    @Test
    void shouldReportTheTimeSinceTheLastCheckAfterAQuietSpell()
    {
        final DropBurstWatcher watcher = watcher();
        now += 3 * SECOND + SECOND / 2;
        add(DataplaneCounter.DROP_INJECTED, 4);
        add(DataplaneCounter.DROP_SPOOFED, 4);

        assertThat(watcher.tick()).isEqualTo("ring traffic dropped: 4 spoofed, 4 injected in the last 3.5 s");
    }

    @Test
    void shouldWarnOfAFullReceiveRingOnALineOfItsOwnBesideTheDataplanesDrops()
    {
        final long[] rxDropped = { 3 };
        final long[] truncated = { 0 };
        final DropBurstWatcher watcher = new DropBurstWatcher(counter -> counters.getOrDefault(counter, 0L),
            List.of(new DropBurstWatcher.PortDrop("eth0 rx_dropped (receive ring full)", () -> rxDropped[0]),
                new DropBurstWatcher.PortDrop("eth0 rx_truncated (frame longer than a receive slot)",
                    () -> truncated[0])),
            () -> now, SECOND, lines::add);
        rxDropped[0] += 7431;
        add(DataplaneCounter.DROP_FIRST_PACKET_LOST, 242);
        now += SECOND;

        assertThat(watcher.tick()).isEqualTo("ring traffic dropped: 242 first packet lost in the last 1.0 s\n" +
            "port traffic dropped: 7431 eth0 rx_dropped (receive ring full) in the last 1.0 s");
        assertThat(lines).containsExactly("ring traffic dropped: 242 first packet lost in the last 1.0 s",
            "port traffic dropped: 7431 eth0 rx_dropped (receive ring full) in the last 1.0 s");

        truncated[0] += 2;
        now += SECOND;
        assertThat(watcher.tick())
            .isEqualTo("port traffic dropped: 2 eth0 rx_truncated (frame longer than a receive slot) in the last 1.0 s");
        now += SECOND;
        assertThat(watcher.tick()).isNull();
    }
}

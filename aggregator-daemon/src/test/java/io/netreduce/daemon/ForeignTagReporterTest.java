package io.netreduce.daemon;

import io.netreduce.dataplane.netreduce.ForeignTagEvents;
import io.netreduce.dataplane.clt.FlowKey;
import io.netreduce.dataplane.clt.IpKey;
import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.dataplane.ring.RingMember;
import io.netreduce.protocol.element.ElementType;
import org.junit.jupiter.api.Test;

import java.net.InetAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

import static org.assertj.core.api.Assertions.assertThat;

class ForeignTagReporterTest
{
    @Test
    void shouldNameTheConnectionTheRingEdgeTheTagFoundAndTheTagExpected() throws Exception
    {
        final InetAddress a = InetAddress.getByName("10.0.0.1");
        final InetAddress b = InetAddress.getByName("10.0.0.2");
        final RingDefinition ring = new RingDefinition(4, "job", ElementType.FP32, 2, 2, 256,
            List.of(new RingMember(0, a), new RingMember(1, b)));
        final FlowKey key = new FlowKey().set(IpKey.high(a), IpKey.low(a), IpKey.high(b), IpKey.low(b), 0x123);

        final String line = ForeignTagReporter.describe(new ForeignTagEvents.Event(key, 0x4142_4344, 4), List.of(ring));

        assertThat(line).contains("connection 10.0.0.1 -> 10.0.0.2 QP 291", "ring 4 (rank 0 -> 1, expects InetTag " +
            "0x4E524544 'NRED')", "tag 0x41424344 'ABCD' and RingID byte 4", "passed through unaggregated",
            "rings[].inetTag");
    }

    /**
     * 2,000 crafted first packets, each a connection of its own from one source, used to give 2,000 WARN lines of
     * 420 characters (as many as the event buffer held; the rest were lost without a word). Now a source gets a few
     * lines a minute, then one line saying how many it did not get, and another source still gets its own.
     */
    @Test
    void shouldLogAFewLinesPerSourceAMinuteAndSayHowManyWereSuppressed() throws Exception
    {
        final InetAddress a = InetAddress.getByName("10.0.0.1");
        final InetAddress b = InetAddress.getByName("10.0.0.2");
        final InetAddress c = InetAddress.getByName("10.0.0.3");
        final RingDefinition ring = new RingDefinition(4, "job", ElementType.FP32, 2, 2, 256,
            List.of(new RingMember(0, a), new RingMember(1, b), new RingMember(2, c)));
        final List<ForeignTagEvents.Event> waiting = new ArrayList<>();
        final long[] now = { TimeUnit.SECONDS.toNanos(100) };
        final long[] lost = { 0 };
        final List<String> lines = new ArrayList<>();
        final ForeignTagReporter reporter = new ForeignTagReporter(consumer ->
        {
            final int n = waiting.size();
            waiting.forEach(consumer);
            waiting.clear();
            return n;
        }, () -> List.of(ring), () -> lost[0], () -> now[0], lines::add);

        for (int qp = 0; qp < 2_000; qp++)
        {
            waiting.add(event(a, b, qp));
        }
        waiting.add(event(b, c, 7));
        lost[0] = 300;
        reporter.drain();
        assertThat(lines).as("the first lines of each source, and the lost events").hasSize(
            ForeignTagReporter.LINES_PER_SOURCE + 2);
        assertThat(lines.stream().filter(line -> line.startsWith("connection 10.0.0.1 ->")))
            .hasSize(ForeignTagReporter.LINES_PER_SOURCE);
        assertThat(lines).anyMatch(line -> line.startsWith("connection 10.0.0.2 -> 10.0.0.3 QP 7"));
        assertThat(lines).anyMatch(line -> line.contains("300 connection(s) on ring edges without their ring's " +
            "InetTag were not reported") && line.contains("event buffer was full"));

        lines.clear();
        now[0] += TimeUnit.SECONDS.toNanos(30);
        waiting.add(event(a, b, 5_000));
        reporter.drain();
        assertThat(lines).as("still within the minute: counted, not logged").isEmpty();

        now[0] += TimeUnit.SECONDS.toNanos(31);
        reporter.drain();
        assertThat(lines).containsExactly("foreign-tag reports from 10.0.0.1: " +
            (2_001 - ForeignTagReporter.LINES_PER_SOURCE) + " more connection(s) on ring edges without their " +
            "ring's InetTag in the last 60 s were not logged one by one (counter foreign_tag_on_ring_edge counts " +
            "them all)");

        lines.clear();
        waiting.add(event(a, b, 6_000));
        reporter.drain();
        assertThat(lines).as("the source resumes").hasSize(1);
        assertThat(lines.getFirst()).startsWith("connection 10.0.0.1 -> 10.0.0.2 QP 6000");
    }

    private static ForeignTagEvents.Event event(final InetAddress src, final InetAddress dst, final int qp)
    {
        return new ForeignTagEvents.Event(
            new FlowKey().set(IpKey.high(src), IpKey.low(src), IpKey.high(dst), IpKey.low(dst), qp), 0x4142_4344, 4);
    }

    @Test
    void shouldShowUnprintableTagsAsHexOnly()
    {
        assertThat(ForeignTagReporter.tagText(0x0102_0304)).isEqualTo("0x01020304");
        assertThat(ForeignTagReporter.tagText(0x4E52_4553)).isEqualTo("0x4E524553 'NRES'");
    }
}

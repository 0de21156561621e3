package io.netreduce.daemon;

import io.netreduce.dataplane.netreduce.ForeignTagEvents;
import io.netreduce.dataplane.clt.FlowKey;
import io.netreduce.dataplane.clt.IpKey;
import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.dataplane.ring.RingMember;
import io.netreduce.protocol.element.ElementType;
import org.junit.jupiter.api.Test;

import java.net.InetAddress;
import java.util.List;

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

    @Test
    void shouldShowUnprintableTagsAsHexOnly()
    {
        assertThat(ForeignTagReporter.tagText(0x0102_0304)).isEqualTo("0x01020304");
        assertThat(ForeignTagReporter.tagText(0x4E52_4553)).isEqualTo("0x4E524553 'NRES'");
    }
}

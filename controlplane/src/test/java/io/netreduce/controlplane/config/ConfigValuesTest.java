package io.netreduce.controlplane.config;

import org.junit.jupiter.api.Test;

import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class ConfigValuesTest
{
    @Test
    void shouldParseBinarySizes()
    {
        assertThat(ByteSize.parse("512MiB")).isEqualTo(512L << 20);
        assertThat(ByteSize.parse("2GiB")).isEqualTo(2L << 30);
        assertThat(ByteSize.parse("64k")).isEqualTo(64L << 10);
        assertThat(ByteSize.parse("1048576")).isEqualTo(1L << 20);
        assertThat(ByteSize.format(512L << 20)).isEqualTo("512MiB");
        assertThatThrownBy(() -> ByteSize.parse("1.5GiB")).hasMessageContaining("not a size");
        assertThatThrownBy(() -> ByteSize.parse("99999999999TiB")).hasMessageContaining("too large");
    }

    @Test
    void shouldParseListenAddresses()
    {
        assertThat(ListenAddress.parse("127.0.0.1:9740")).isEqualTo(new ListenAddress("127.0.0.1", 9740, null));
        assertThat(ListenAddress.parse("[::1]:80").toString()).isEqualTo("[::1]:80");
        assertThat(ListenAddress.parse("unix:/run/netreduce/api.sock").unixPath())
            .isEqualTo(Path.of("/run/netreduce/api.sock"));
        assertThatThrownBy(() -> ListenAddress.parse("unix:api.sock")).hasMessageContaining("absolute");
        assertThatThrownBy(() -> ListenAddress.parse("example.com:80")).hasMessageContaining("not an IP address");
        assertThatThrownBy(() -> ListenAddress.parse("127.0.0.1:70000")).hasMessageContaining("0..65535");
    }

    @Test
    void shouldBudgetTwoWindowsOfAggregatorsHoldingEveryRankAndTheResult()
    {
        // 2 * 8 * 16 aggregators of (3 * (1024 + 128) + 1024 + 64) bytes.
        assertThat(AggregatorMemory.bytesPerRing(3, 8, 16, 1024)).isEqualTo(256L * (3 * 1152 + 1088));
        assertThat(AggregatorMemory.HEADER_ROOM).isEqualTo(128);
    }
}

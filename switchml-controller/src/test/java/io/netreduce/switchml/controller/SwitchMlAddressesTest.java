package io.netreduce.switchml.controller;

import org.junit.jupiter.api.Test;

import java.net.Inet4Address;
import java.net.InetAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.SplittableRandom;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class SwitchMlAddressesTest
{
    /** The published client's dpdk_utils.cc ChangeMacEndianness, transcribed. */
    private static long changeMacEndianness(final long mac)
    {
        return (mac & 0xFFL) << 40 | (mac & 0xFF00L) << 24 | (mac & 0xFF0000L) << 8 | (mac & 0xFF000000L) >> 8 |
            (mac & 0xFF00000000L) >> 24 | (mac & 0xFF0000000000L) >> 40;
    }

    /** What the published client sends for a port whose MAC is {@code octets}: memcpy into a uint64_t (x86), then reversed. */
    private static long sentByThePublishedClient(final byte[] octets)
    {
        final ByteBuffer memory = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN);
        memory.put(octets);
        return changeMacEndianness(memory.getLong(0));
    }

    @Test
    void shouldEncodeAMacAsThePublishedClientSendsIt()
    {
        final byte[] octets = {0x02, 0x77, 0x00, 0x00, 0x00, 0x01};
        assertThat(sentByThePublishedClient(octets)).isEqualTo(0x0277_0000_0001L);
        assertThat(SwitchMlAddresses.macFromOctets(octets)).isEqualTo(0x0277_0000_0001L);
        assertThat(SwitchMlAddresses.parseMac("02:77:00:00:00:01")).isEqualTo(0x0277_0000_0001L);
        // The Tofino controller's reading of the same value: '{:012X}', split in pairs.
        assertThat(String.format("%012X", 0x0277_0000_0001L)).isEqualTo("027700000001");
        assertThat(SwitchMlAddresses.formatMac(0x0277_0000_0001L)).isEqualTo("02:77:00:00:00:01");
    }

    @Test
    void shouldAgreeWithThePublishedClientOnRandomMacs()
    {
        final SplittableRandom random = new SplittableRandom(20260101L);
        for (int i = 0; i < 1000; i++)
        {
            final byte[] octets = new byte[6];
            for (int j = 0; j < 6; j++)
            {
                octets[j] = (byte)random.nextInt(256);
            }
            final long mac = SwitchMlAddresses.macFromOctets(octets);
            assertThat(mac).as("octets %s", java.util.HexFormat.of().formatHex(octets))
                .isEqualTo(sentByThePublishedClient(octets));
            assertThat(SwitchMlAddresses.macOctets(mac)).isEqualTo(octets);
            assertThat(SwitchMlAddresses.parseMac(SwitchMlAddresses.formatMac(mac))).isEqualTo(mac);
            // What the client does with the appliance's reply: reverse again, then the low six bytes in memory.
            final ByteBuffer memory = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN);
            memory.putLong(changeMacEndianness(mac));
            assertThat(java.util.Arrays.copyOf(memory.array(), 6)).isEqualTo(octets);
        }
    }

    @Test
    void shouldEncodeIpv4InHostOrder() throws Exception
    {
        final Inet4Address address = (Inet4Address)InetAddress.getByName("10.0.0.1");
        assertThat(SwitchMlAddresses.ipv4(address)).isEqualTo(0x0A00_0001);
        assertThat(SwitchMlAddresses.ipv4Address(0x0A00_0001)).isEqualTo(address);
        assertThat(SwitchMlAddresses.formatIpv4(0xC0A8_01FE)).isEqualTo("192.168.1.254");
        assertThat(SwitchMlAddresses.ipv4(SwitchMlAddresses.ipv4Address(0xFFFF_FFFF))).isEqualTo(0xFFFF_FFFF);
    }

    @Test
    void shouldRejectWhatIsNotAMac()
    {
        assertThatThrownBy(() -> SwitchMlAddresses.parseMac("02:77:00:00:01")).hasMessageContaining("not a MAC");
        assertThatThrownBy(() -> SwitchMlAddresses.parseMac("02:77:00:00:00:zz")).hasMessageContaining("not a MAC");
        assertThatThrownBy(() -> SwitchMlAddresses.parseMac("02:77:00:00:00:001")).hasMessageContaining("not a MAC");
        assertThatThrownBy(() -> new UdpSessionReply(1L << 48, 0)).hasMessageContaining("a MAC has 48 bits");
        assertThatThrownBy(() -> SwitchMlAddresses.macFromOctets(new byte[5])).hasMessageContaining("6 octets");
    }
}

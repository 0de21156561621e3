package io.netreduce.protocol.icrc;

import java.util.Arrays;

/**
 * A deliberately plain ICRC for RoCEv2 frames, written straight from the IBTA RoCEv2 annex (A17.3.3) as a test
 * oracle independent of {@link Icrc}: copy the IP packet, overwrite the variant fields with ones, prefix eight
 * bytes of ones for the absent LRH, and run a bit-at-a-time CRC-32 over it. No tables, no combining, its own
 * header parsing. Slow on purpose; only tests use it.
 * <p>
 * Masked (set to all ones): IPv4 type of service, time to live and header checksum; IPv6 traffic class, flow
 * label and hop limit; UDP checksum; BTH byte 4 (FECN, BECN and the reserved bits). The CRC is the Ethernet one
 * (polynomial 0x04C11DB7, reflected, initial value and final XOR all ones) and goes on the wire least significant
 * byte first.
 */
public final class AnnexIcrc
{
    private static final int ETHERTYPE_VLAN = 0x8100;
    private static final int ETHERTYPE_IPV4 = 0x0800;
    private static final int ETHERTYPE_IPV6 = 0x86DD;
    private static final int REFLECTED_POLYNOMIAL = 0xEDB88320;

    private AnnexIcrc()
    {
    }

    /**
     * @param frame an Ethernet frame holding a complete RoCEv2 packet (optionally 802.1Q tagged).
     * @return the ICRC the frame should carry, as the 32-bit value whose little-endian bytes go on the wire.
     * @throws IllegalArgumentException if the frame is not Ethernet/IP/UDP as this oracle understands it.
     */
    public static int compute(final byte[] frame)
    {
        final int ipStart = ipStart(frame);
        final int ipEnd = ipEnd(frame, ipStart);
        final byte[] masked = Arrays.copyOfRange(frame, ipStart, ipEnd - 4);

        final int udpStart;
        if (version(frame, ipStart) == 4)
        {
            masked[1] = (byte)0xFF;  // type of service
            masked[8] = (byte)0xFF;  // time to live
            masked[10] = (byte)0xFF; // header checksum
            masked[11] = (byte)0xFF;
            udpStart = (frame[ipStart] & 0x0F) * 4;
        }
        else
        {
            masked[0] |= 0x0F;       // low nibble of traffic class
            masked[1] = (byte)0xFF;  // rest of traffic class, flow label
            masked[2] = (byte)0xFF;
            masked[3] = (byte)0xFF;
            masked[7] = (byte)0xFF;  // hop limit
            udpStart = 40;
        }
        masked[udpStart + 6] = (byte)0xFF; // UDP checksum
        masked[udpStart + 7] = (byte)0xFF;
        masked[udpStart + 8 + 4] = (byte)0xFF; // BTH byte 4: FECN, BECN, reserved

        int crc = 0xFFFF_FFFF;
        for (int i = 0; i < 8; i++)
        {
            crc = update(crc, 0xFF); // the LRH a RoCEv2 packet does not have
        }
        for (final byte b : masked)
        {
            crc = update(crc, b & 0xFF);
        }
        return ~crc;
    }

    /**
     * @return the ICRC the frame carries, as the 32-bit value read little-endian from its last four IP bytes.
     */
    public static int carried(final byte[] frame)
    {
        final int end = ipEnd(frame, ipStart(frame));
        return (frame[end - 4] & 0xFF) |
            (frame[end - 3] & 0xFF) << 8 |
            (frame[end - 2] & 0xFF) << 16 |
            (frame[end - 1] & 0xFF) << 24;
    }

    private static int update(final int crc, final int octet)
    {
        int c = crc ^ octet;
        for (int bit = 0; bit < 8; bit++)
        {
            c = (c & 1) != 0 ? (c >>> 1) ^ REFLECTED_POLYNOMIAL : c >>> 1;
        }
        return c;
    }

    private static int ipStart(final byte[] frame)
    {
        int etherType = u16(frame, 12);
        int offset = 14;
        if (etherType == ETHERTYPE_VLAN)
        {
            etherType = u16(frame, 16);
            offset = 18;
        }
        if (etherType != ETHERTYPE_IPV4 && etherType != ETHERTYPE_IPV6)
        {
            throw new IllegalArgumentException("not IP: ethertype 0x" + Integer.toHexString(etherType));
        }
        return offset;
    }

    private static int ipEnd(final byte[] frame, final int ipStart)
    {
        final int end = version(frame, ipStart) == 4 ?
            ipStart + u16(frame, ipStart + 2) :
            ipStart + 40 + u16(frame, ipStart + 4);
        if (end > frame.length)
        {
            throw new IllegalArgumentException("IP length runs past the frame");
        }
        return end;
    }

    private static int version(final byte[] frame, final int ipStart)
    {
        return (frame[ipStart] & 0xF0) >>> 4;
    }

    private static int u16(final byte[] frame, final int offset)
    {
        return (frame[offset] & 0xFF) << 8 | frame[offset + 1] & 0xFF;
    }
}

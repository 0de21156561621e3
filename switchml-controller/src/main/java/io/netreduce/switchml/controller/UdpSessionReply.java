package io.netreduce.switchml.controller;

/**
 * The appliance's SwitchML addresses, which a worker sends its packets to, in the encodings of
 * {@link UdpSessionRequest}.
 *
 * @param mac the appliance's Ethernet address in the low 48 bits, first octet the most significant of them.
 * @param ipv4 the appliance's IPv4 address as a host-order integer.
 */
public record UdpSessionReply(long mac, int ipv4)
{
    /**
     * @throws IllegalArgumentException when {@code mac} has bits above the low 48 set.
     */
    public UdpSessionReply
    {
        SwitchMlAddresses.requireMac(mac);
    }
}

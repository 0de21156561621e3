package io.netreduce.protocol.wire;

/**
 * The BTH opcode table for RC, UC and UD and the RoCEv2 CNP: for every opcode its name, which extension
 * headers follow the BTH (in wire order RETH/DETH, AtomicETH, AETH, AtomicAckETH, ImmDt, IETH) and their total
 * length. Lookups are array reads so the dataplane can call them per packet.
 */
public final class Opcode
{
    public static final int RC = 0x00;
    public static final int UC = 0x20;
    public static final int RD = 0x40;
    public static final int UD = 0x60;
    public static final int CNP_TRANSPORT = 0x80;

    public static final int SEND_FIRST = 0x00;
    public static final int SEND_MIDDLE = 0x01;
    public static final int SEND_LAST = 0x02;
    public static final int SEND_LAST_WITH_IMMEDIATE = 0x03;
    public static final int SEND_ONLY = 0x04;
    public static final int SEND_ONLY_WITH_IMMEDIATE = 0x05;
    public static final int RDMA_WRITE_FIRST = 0x06;
    public static final int RDMA_WRITE_MIDDLE = 0x07;
    public static final int RDMA_WRITE_LAST = 0x08;
    public static final int RDMA_WRITE_LAST_WITH_IMMEDIATE = 0x09;
    public static final int RDMA_WRITE_ONLY = 0x0A;
    public static final int RDMA_WRITE_ONLY_WITH_IMMEDIATE = 0x0B;
    public static final int RDMA_READ_REQUEST = 0x0C;
    public static final int RDMA_READ_RESPONSE_FIRST = 0x0D;
    public static final int RDMA_READ_RESPONSE_MIDDLE = 0x0E;
    public static final int RDMA_READ_RESPONSE_LAST = 0x0F;
    public static final int RDMA_READ_RESPONSE_ONLY = 0x10;
    public static final int ACKNOWLEDGE = 0x11;
    public static final int ATOMIC_ACKNOWLEDGE = 0x12;
    public static final int COMPARE_SWAP = 0x13;
    public static final int FETCH_ADD = 0x14;
    public static final int SEND_LAST_WITH_INVALIDATE = 0x16;
    public static final int SEND_ONLY_WITH_INVALIDATE = 0x17;

    /** RoCEv2 Congestion Notification Packet: BTH, 16 reserved bytes, ICRC. */
    public static final int CNP = 0x81;
    /** Length of the reserved block a CNP carries after its BTH. */
    public static final int CNP_RESERVED_LENGTH = 16;

    public static final int HAS_RETH = 1;
    public static final int HAS_AETH = 1 << 1;
    public static final int HAS_IMMDT = 1 << 2;
    public static final int HAS_DETH = 1 << 3;
    public static final int HAS_ATOMIC_ETH = 1 << 4;
    public static final int HAS_ATOMIC_ACK_ETH = 1 << 5;
    public static final int HAS_IETH = 1 << 6;
    /** Opcode carries payload (SEND/WRITE/READ RESPONSE data, or the CNP's reserved block). */
    public static final int HAS_PAYLOAD = 1 << 7;
    /** First or only packet of a message. */
    public static final int IS_FIRST = 1 << 8;
    /** Last or only packet of a message. */
    public static final int IS_LAST = 1 << 9;
    /** Opcode value is assigned. */
    public static final int VALID = 1 << 10;

    public static final int ATOMIC_ETH_LENGTH = 28;
    public static final int ATOMIC_ACK_ETH_LENGTH = 8;
    public static final int IETH_LENGTH = 4;

    private static final int[] FLAGS = new int[256];
    private static final int[] EXTENSION_LENGTH = new int[256];
    private static final String[] NAMES = new String[256];

    static
    {
        for (final int transport : new int[]{ RC, UC })
        {
            final String prefix = transport == RC ? "RC_" : "UC_";
            define(transport | SEND_FIRST, prefix + "SEND_FIRST", HAS_PAYLOAD | IS_FIRST);
            define(transport | SEND_MIDDLE, prefix + "SEND_MIDDLE", HAS_PAYLOAD);
            define(transport | SEND_LAST, prefix + "SEND_LAST", HAS_PAYLOAD | IS_LAST);
            define(transport | SEND_LAST_WITH_IMMEDIATE, prefix + "SEND_LAST_WITH_IMMEDIATE",
                HAS_PAYLOAD | IS_LAST | HAS_IMMDT);
            define(transport | SEND_ONLY, prefix + "SEND_ONLY", HAS_PAYLOAD | IS_FIRST | IS_LAST);
            define(transport | SEND_ONLY_WITH_IMMEDIATE, prefix + "SEND_ONLY_WITH_IMMEDIATE",
                HAS_PAYLOAD | IS_FIRST | IS_LAST | HAS_IMMDT);
            define(transport | RDMA_WRITE_FIRST, prefix + "RDMA_WRITE_FIRST", HAS_PAYLOAD | IS_FIRST | HAS_RETH);
            define(transport | RDMA_WRITE_MIDDLE, prefix + "RDMA_WRITE_MIDDLE", HAS_PAYLOAD);
            define(transport | RDMA_WRITE_LAST, prefix + "RDMA_WRITE_LAST", HAS_PAYLOAD | IS_LAST);
            define(transport | RDMA_WRITE_LAST_WITH_IMMEDIATE, prefix + "RDMA_WRITE_LAST_WITH_IMMEDIATE",
                HAS_PAYLOAD | IS_LAST | HAS_IMMDT);
            define(transport | RDMA_WRITE_ONLY, prefix + "RDMA_WRITE_ONLY",
                HAS_PAYLOAD | IS_FIRST | IS_LAST | HAS_RETH);
            define(transport | RDMA_WRITE_ONLY_WITH_IMMEDIATE, prefix + "RDMA_WRITE_ONLY_WITH_IMMEDIATE",
                HAS_PAYLOAD | IS_FIRST | IS_LAST | HAS_RETH | HAS_IMMDT);
        }
        define(RDMA_READ_REQUEST, "RC_RDMA_READ_REQUEST", IS_FIRST | IS_LAST | HAS_RETH);
        define(RDMA_READ_RESPONSE_FIRST, "RC_RDMA_READ_RESPONSE_FIRST", HAS_PAYLOAD | IS_FIRST | HAS_AETH);
        define(RDMA_READ_RESPONSE_MIDDLE, "RC_RDMA_READ_RESPONSE_MIDDLE", HAS_PAYLOAD);
        define(RDMA_READ_RESPONSE_LAST, "RC_RDMA_READ_RESPONSE_LAST", HAS_PAYLOAD | IS_LAST | HAS_AETH);
        define(RDMA_READ_RESPONSE_ONLY, "RC_RDMA_READ_RESPONSE_ONLY", HAS_PAYLOAD | IS_FIRST | IS_LAST | HAS_AETH);
        define(ACKNOWLEDGE, "RC_ACKNOWLEDGE", IS_FIRST | IS_LAST | HAS_AETH);
        define(ATOMIC_ACKNOWLEDGE, "RC_ATOMIC_ACKNOWLEDGE", IS_FIRST | IS_LAST | HAS_AETH | HAS_ATOMIC_ACK_ETH);
        define(COMPARE_SWAP, "RC_COMPARE_SWAP", IS_FIRST | IS_LAST | HAS_ATOMIC_ETH);
        define(FETCH_ADD, "RC_FETCH_ADD", IS_FIRST | IS_LAST | HAS_ATOMIC_ETH);
        define(SEND_LAST_WITH_INVALIDATE, "RC_SEND_LAST_WITH_INVALIDATE", HAS_PAYLOAD | IS_LAST | HAS_IETH);
        define(SEND_ONLY_WITH_INVALIDATE, "RC_SEND_ONLY_WITH_INVALIDATE",
            HAS_PAYLOAD | IS_FIRST | IS_LAST | HAS_IETH);
        define(UD | SEND_ONLY, "UD_SEND_ONLY", HAS_PAYLOAD | IS_FIRST | IS_LAST | HAS_DETH);
        define(UD | SEND_ONLY_WITH_IMMEDIATE, "UD_SEND_ONLY_WITH_IMMEDIATE",
            HAS_PAYLOAD | IS_FIRST | IS_LAST | HAS_DETH | HAS_IMMDT);
        define(CNP, "CNP", HAS_PAYLOAD | IS_FIRST | IS_LAST);
    }

    private Opcode()
    {
    }

    private static void define(final int opcode, final String name, final int flags)
    {
        FLAGS[opcode] = flags | VALID;
        NAMES[opcode] = name;
        int length = 0;
        length += (flags & HAS_RETH) != 0 ? RethHeader.LENGTH : 0;
        length += (flags & HAS_DETH) != 0 ? DethHeader.LENGTH : 0;
        length += (flags & HAS_ATOMIC_ETH) != 0 ? ATOMIC_ETH_LENGTH : 0;
        length += (flags & HAS_AETH) != 0 ? AethHeader.LENGTH : 0;
        length += (flags & HAS_ATOMIC_ACK_ETH) != 0 ? ATOMIC_ACK_ETH_LENGTH : 0;
        length += (flags & HAS_IMMDT) != 0 ? ImmDtHeader.LENGTH : 0;
        length += (flags & HAS_IETH) != 0 ? IETH_LENGTH : 0;
        EXTENSION_LENGTH[opcode] = length;
    }

    public static boolean isValid(final int opcode)
    {
        return (FLAGS[opcode & 0xFF] & VALID) != 0;
    }

    public static int flags(final int opcode)
    {
        return FLAGS[opcode & 0xFF];
    }

    public static boolean has(final int opcode, final int flag)
    {
        return (FLAGS[opcode & 0xFF] & flag) != 0;
    }

    /**
     * @return bytes of extension headers between the BTH and the payload; 0 for unassigned opcodes.
     */
    public static int extensionHeadersLength(final int opcode)
    {
        return EXTENSION_LENGTH[opcode & 0xFF];
    }

    /**
     * @return bytes from the start of the BTH to the payload.
     */
    public static int headerLength(final int opcode)
    {
        return BthHeader.LENGTH + EXTENSION_LENGTH[opcode & 0xFF];
    }

    /**
     * Offset of the RETH/DETH/AtomicETH from the start of the BTH (they come first when present).
     */
    public static int rethOffset(final int opcode)
    {
        return BthHeader.LENGTH;
    }

    /**
     * @return offset of the AETH from the start of the BTH, or -1 if the opcode has none.
     */
    public static int aethOffset(final int opcode)
    {
        return has(opcode, HAS_AETH) ? BthHeader.LENGTH : -1;
    }

    /**
     * @return offset of the ImmDt from the start of the BTH, or -1 if the opcode has none.
     */
    public static int immDtOffset(final int opcode)
    {
        if (!has(opcode, HAS_IMMDT))
        {
            return -1;
        }
        return BthHeader.LENGTH + (has(opcode, HAS_RETH) ? RethHeader.LENGTH : 0) +
            (has(opcode, HAS_DETH) ? DethHeader.LENGTH : 0);
    }

    /**
     * @return the opcode's name, e.g. {@code RC_RDMA_WRITE_FIRST}, or {@code UNKNOWN_0xNN}.
     */
    public static String name(final int opcode)
    {
        final String name = NAMES[opcode & 0xFF];
        return name != null ? name : String.format("UNKNOWN_0x%02X", opcode & 0xFF);
    }

    /**
     * @return every assigned opcode value in ascending order.
     */
    public static int[] all()
    {
        int count = 0;
        for (int i = 0; i < 256; i++)
        {
            count += isValid(i) ? 1 : 0;
        }
        final int[] result = new int[count];
        for (int i = 0, j = 0; i < 256; i++)
        {
            if (isValid(i))
            {
                result[j++] = i;
            }
        }
        return result;
    }
}

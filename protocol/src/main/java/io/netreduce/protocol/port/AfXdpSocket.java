package io.netreduce.protocol.port;

import org.agrona.concurrent.UnsafeBuffer;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.locks.LockSupport;

import static io.netreduce.protocol.port.LinuxPacketAbi.*;
import static io.netreduce.protocol.port.XdpAbi.*;

/**
 * The AF_XDP socket of an {@link AfXdpPort} and what goes with it, with the steps that set them up: the UMEM
 * registered with the socket, its four rings mapped, the XSKMAP and program that redirect the queue's frames to it
 * (attached by a BPF link), and the packet socket that holds promiscuous mode. It holds what has been acquired so
 * far, so a failed step can release it; once every step has succeeded the port keeps it and releases it on close.
 */
final class AfXdpSocket
{
    /** How {@link #openSocket} waits for a queue that a just-closed socket still holds. */
    private static final long QUEUE_RELEASE_WAIT_NS = 2_000_000_000L;
    /** getsockopt XDP_OPTIONS: struct xdp_options { __u32 flags; } with XDP_OPTIONS_ZEROCOPY. */
    private static final int XDP_OPTIONS = 8;
    private static final int XDP_OPTIONS_ZEROCOPY = 1;

    private final AfXdpConfiguration configuration;
    private final String name;
    private final PortSystemCalls system;
    private int ifIndex;
    private int mtu;
    private byte[] macAddress;
    private XdpUmemLayout layout;
    private boolean zeroCopy;
    private boolean nativeXdp;
    private int xskFd = -1;
    private int mapFd = -1;
    private int programFd = -1;
    private int linkFd = -1;
    private int promiscuousFd = -1;
    private long umemAddress;
    private XdpRing rx;
    private XdpRing fill;
    private XdpRing tx;
    private XdpRing completion;
    private int fillProducer;
    private final XdpRing[] mappedRings = new XdpRing[4];
    private int mappedRingCount;

    AfXdpSocket(final AfXdpConfiguration configuration)
    {
        this.configuration = configuration;
        this.name = configuration.interfaceName();
        this.system = new PortSystemCalls(name);
    }

    AfXdpConfiguration configuration()
    {
        return configuration;
    }

    PortSystemCalls system()
    {
        return system;
    }

    int ifIndex()
    {
        return ifIndex;
    }

    int mtu()
    {
        return mtu;
    }

    byte[] macAddress()
    {
        return macAddress;
    }

    XdpUmemLayout layout()
    {
        return layout;
    }

    boolean zeroCopy()
    {
        return zeroCopy;
    }

    boolean nativeXdp()
    {
        return nativeXdp;
    }

    int xskFd()
    {
        return xskFd;
    }

    /**
     * @return the UMEM as one buffer: what the port receives from and claims transmit slots in.
     */
    UnsafeBuffer newUmemBuffer()
    {
        return new UnsafeBuffer(umemAddress, (int)layout.length());
    }

    XdpReceiver newReceiver(final UnsafeBuffer umem, final PortCounters counters)
    {
        return new XdpReceiver(
            xskFd, system.errnoState(), rx, fill, fillProducer, umem, layout, system.arena(), counters);
    }

    XdpTransmitter newTransmitter(final UnsafeBuffer umem, final PortCounters counters)
    {
        return new XdpTransmitter(name, xskFd, system.errnoState(), tx, completion, umem, layout, counters);
    }

    void openSocket()
    {
        try (Arena scratch = Arena.ofConfined())
        {
            ifIndex = system.interfaceIndex(scratch);
            xskFd = system.rawSocket(AF_XDP, "AF_XDP");
            // A packet socket of protocol 0 receives nothing; it serves the interface ioctls (an AF_XDP socket
            // has none) and, kept open, holds the promiscuous membership.
            promiscuousFd = system.rawSocket(AF_PACKET, "AF_PACKET");
            final InterfaceInfo info = system.interfaceInfo(promiscuousFd, scratch);
            mtu = info.mtu();
            macAddress = info.macAddress();
            if (configuration.promiscuous())
            {
                system.addPromiscuousMembership(scratch, promiscuousFd, ifIndex);
            }
            else
            {
                system.close(promiscuousFd);
                promiscuousFd = -1;
            }

            layout = new XdpUmemLayout(configuration, mtu);
            final long umemLength = layout.length();
            umemAddress = system.map(umemLength, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0L, "UMEM");

            final MemorySegment registration = scratch.allocate(UMEM_REG_SIZE, 8);
            registration.set(ValueLayout.JAVA_LONG, UMEM_REG_ADDR_OFFSET, umemAddress);
            registration.set(ValueLayout.JAVA_LONG, UMEM_REG_LEN_OFFSET, umemLength);
            registration.set(ValueLayout.JAVA_INT, UMEM_REG_CHUNK_SIZE_OFFSET, layout.chunkSize());
            registration.set(ValueLayout.JAVA_INT, UMEM_REG_HEADROOM_OFFSET, 0);
            registration.set(ValueLayout.JAVA_INT, UMEM_REG_FLAGS_OFFSET, 0);
            registration.set(ValueLayout.JAVA_INT, UMEM_REG_TX_METADATA_LEN_OFFSET, 0);
            system.setOption(xskFd, SOL_XDP, XDP_UMEM_REG, registration, UMEM_REG_SIZE,
                "XDP_UMEM_REG (" + layout.chunkCount() + " chunks of " + layout.chunkSize() + " bytes)");

            final int rxChunks = layout.rxChunks();
            final int txRingSize = layout.txRingSize();
            setRingSize(scratch, XDP_UMEM_FILL_RING, rxChunks, "XDP_UMEM_FILL_RING");
            setRingSize(scratch, XDP_UMEM_COMPLETION_RING, txRingSize, "XDP_UMEM_COMPLETION_RING");
            setRingSize(scratch, XDP_RX_RING, rxChunks, "XDP_RX_RING");
            setRingSize(scratch, XDP_TX_RING, txRingSize, "XDP_TX_RING");

            final MemorySegment errnoState = system.errnoState();
            final MemorySegment offsets = scratch.allocate(MMAP_OFFSETS_SIZE, 8);
            final MemorySegment offsetsLength = scratch.allocate(ValueLayout.JAVA_INT);
            offsetsLength.set(ValueLayout.JAVA_INT, 0, MMAP_OFFSETS_SIZE);
            if (Libc.getsockopt(errnoState, xskFd, SOL_XDP, XDP_MMAP_OFFSETS, offsets, offsetsLength) < 0)
            {
                throw new PortException("getsockopt XDP_MMAP_OFFSETS on '" + name + "'", Libc.errno(errnoState));
            }
            rx = mapRing(offsets, MMAP_OFFSETS_RX, XDP_PGOFF_RX_RING, rxChunks, DESC_SIZE, "RX ring");
            tx = mapRing(offsets, MMAP_OFFSETS_TX, XDP_PGOFF_TX_RING, txRingSize, DESC_SIZE, "TX ring");
            fill = mapRing(offsets, MMAP_OFFSETS_FILL, XDP_UMEM_PGOFF_FILL_RING, rxChunks,
                ADDRESS_ENTRY_SIZE, "fill ring");
            completion = mapRing(offsets, MMAP_OFFSETS_COMPLETION, XDP_UMEM_PGOFF_COMPLETION_RING, txRingSize,
                ADDRESS_ENTRY_SIZE, "completion ring");

            // Every receive chunk starts with the kernel.
            for (int i = 0; i < rxChunks; i++)
            {
                fill.memory().putLong(fill.entryOffset(i), (long)i * layout.chunkSize());
            }
            fillProducer = rxChunks;
            fill.publishProducer(fillProducer);

            bind(scratch);
        }
    }

    /**
     * AUTO binds with neither XDP_COPY nor XDP_ZEROCOPY, which makes the kernel try zero-copy and fall back to
     * copy by itself; XDP_OPTIONS then says which it chose.
     */
    private void bind(final Arena scratch)
    {
        final int modeFlag = switch (configuration.bindMode())
        {
            case AUTO -> 0;
            case COPY -> XDP_COPY;
            case ZERO_COPY -> XDP_ZEROCOPY;
        };
        final MemorySegment errnoState = system.errnoState();
        final MemorySegment address = scratch.allocate(SOCKADDR_XDP_SIZE, 4);
        address.set(ValueLayout.JAVA_SHORT, SOCKADDR_XDP_FAMILY_OFFSET, (short)AF_XDP);
        final boolean multiBuffer = layout.needsMultiBuffer();
        address.set(ValueLayout.JAVA_SHORT, SOCKADDR_XDP_FLAGS_OFFSET,
            (short)(modeFlag | XDP_USE_NEED_WAKEUP | (multiBuffer ? XDP_USE_SG : 0)));
        address.set(ValueLayout.JAVA_INT, SOCKADDR_XDP_IFINDEX_OFFSET, ifIndex);
        address.set(ValueLayout.JAVA_INT, SOCKADDR_XDP_QUEUE_ID_OFFSET, configuration.queueId());
        // A socket closed a moment ago (a port closed and reopened, a daemon restarted) frees its queue only
        // when the kernel's deferred release has run: EBUSY until then, so retry for a while.
        final long deadline = System.nanoTime() + QUEUE_RELEASE_WAIT_NS;
        int result;
        while ((result = Libc.bind(errnoState, xskFd, address, SOCKADDR_XDP_SIZE)) < 0 &&
            Libc.errno(errnoState) == EBUSY && System.nanoTime() < deadline)
        {
            LockSupport.parkNanos(5_000_000L);
        }
        if (result < 0)
        {
            final int errno = Libc.errno(errnoState);
            throw new PortException("bind AF_XDP socket to '" + name + "' queue " + configuration.queueId() +
                " (" + configuration.bindMode().name().toLowerCase().replace('_', '-') +
                (multiBuffer ? ", multi-buffer" : "") +
                (errno == EBUSY ? "; another AF_XDP socket holds the queue" : "") +
                (errno == EINVAL && multiBuffer ? "; frames of " + layout.maxFrameLength() + " bytes span UMEM " +
                    "chunks, and multi-buffer AF_XDP (XDP_USE_SG) needs Linux 6.6 or later: use an MTU of at most " +
                    (layout.chunkSize() - XDP_PACKET_HEADROOM - ETH_HLEN - VLAN_HLEN) + " or af_packet" : "") + ")",
                errno);
        }
        final MemorySegment options = scratch.allocate(ValueLayout.JAVA_INT);
        final MemorySegment optionsLength = scratch.allocate(ValueLayout.JAVA_INT);
        optionsLength.set(ValueLayout.JAVA_INT, 0, Integer.BYTES);
        zeroCopy = Libc.getsockopt(errnoState, xskFd, SOL_XDP, XDP_OPTIONS, options, optionsLength) == 0 &&
            (options.get(ValueLayout.JAVA_INT, 0) & XDP_OPTIONS_ZEROCOPY) != 0;
    }

    void attachProgram()
    {
        final MemorySegment errnoState = system.errnoState();
        mapFd = Bpf.createXskMap(errnoState, configuration.queueId() + 1, name);
        Bpf.putSocket(errnoState, mapFd, configuration.queueId(), xskFd);
        programFd = Bpf.loadRedirectProgram(errnoState, mapFd, name);

        final XdpAttachMode mode = configuration.attachMode();
        int result = -1;
        if (mode != XdpAttachMode.GENERIC)
        {
            result = Bpf.tryLinkXdp(errnoState, programFd, ifIndex, XDP_FLAGS_DRV_MODE);
            nativeXdp = result >= 0;
        }
        if (result < 0 && mode != XdpAttachMode.NATIVE && result != -EBUSY)
        {
            result = Bpf.tryLinkXdp(errnoState, programFd, ifIndex, XDP_FLAGS_SKB_MODE);
        }
        if (result < 0)
        {
            throw new PortException("BPF_LINK_CREATE attaching the XDP program to '" + name + "' (" +
                mode.name().toLowerCase() + " mode" +
                (result == -EBUSY ? "; another XDP program is attached to the interface" : "") + ")", -result);
        }
        linkFd = result;
    }

    private XdpRing mapRing(
        final MemorySegment offsets, final int which, final long pageOffset, final int size, final int entrySize,
        final String what)
    {
        final long producer = offsets.get(ValueLayout.JAVA_LONG, which + RING_OFFSET_PRODUCER);
        final long consumer = offsets.get(ValueLayout.JAVA_LONG, which + RING_OFFSET_CONSUMER);
        final long desc = offsets.get(ValueLayout.JAVA_LONG, which + RING_OFFSET_DESC);
        final long flags = offsets.get(ValueLayout.JAVA_LONG, which + RING_OFFSET_FLAGS);
        final long length = desc + (long)size * entrySize;
        final long address = system.map(length, MAP_SHARED | MAP_POPULATE, xskFd, pageOffset, what);
        final XdpRing ring = new XdpRing(
            address, length, (int)producer, (int)consumer, (int)flags, (int)desc, size, entrySize);
        mappedRings[mappedRingCount++] = ring;
        return ring;
    }

    private void setRingSize(final Arena scratch, final int option, final int size, final String what)
    {
        system.setIntOption(scratch, xskFd, SOL_XDP, option, size, what + " of " + size);
    }

    /**
     * Unmap the rings, close the descriptors (the link first: the program stops redirecting to the socket before
     * the socket goes), unmap the UMEM, then the arena: after a failed step, or on close.
     */
    void release()
    {
        for (int i = 0; i < mappedRingCount; i++)
        {
            // Stray use after close must fail in Java, not touch unmapped memory.
            mappedRings[i].detach();
            system.unmap(mappedRings[i].mapAddress(), mappedRings[i].mapLength());
        }
        system.close(linkFd);
        system.close(programFd);
        system.close(mapFd);
        system.close(xskFd);
        system.close(promiscuousFd);
        if (umemAddress != 0)
        {
            system.unmap(umemAddress, layout.length());
        }
        system.release();
    }
}

package io.netreduce.worker;

import io.netreduce.protocol.port.AfPacketConfiguration;
import io.netreduce.protocol.port.AfPacketPort;
import io.netreduce.protocol.port.RxRingVersion;
import io.netreduce.host.rc.Bootstrap;
import io.netreduce.host.rc.Completion;
import io.netreduce.host.rc.CompletionQueue;
import io.netreduce.host.rc.CompletionStatus;
import io.netreduce.host.rc.ConnectionInfo;
import io.netreduce.host.rc.MemoryRegion;
import io.netreduce.host.rc.QpCounters;
import io.netreduce.host.rc.QueuePair;
import io.netreduce.host.rc.RcConfig;
import io.netreduce.host.rc.RcEndpoint;
import io.netreduce.host.rc.WorkRequest;
import org.agrona.concurrent.SystemNanoClock;
import picocli.CommandLine.ArgGroup;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.io.IOException;
import java.io.PrintStream;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.NetworkInterface;
import java.net.SocketException;
import java.time.Duration;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * {@code netreduce worker write-bw}: an {@code ib_write_bw}-style throughput test between two software RC
 * endpoints. The client (--connect) sends {@code size * iterations} bytes of a seeded pattern by RDMA WRITE
 * (the last message WITH IMMEDIATE so the server knows it is complete) or by SEND; the server (--server) checks
 * every byte and reports back over the bootstrap connection. The client prints goodput and retransmissions.
 */
@Command(
    name = "write-bw",
    mixinStandardHelpOptions = true,
    description = "RC throughput test between two software endpoints (run one --server and one --connect).")
public final class WriteBwCommand implements Callable<Integer>
{
    static final int DEFAULT_PORT = 18515;
    /**
     * Bytes a RoCE frame carries besides its payload, at most: Ethernet, IPv6, UDP, BTH and extension headers, pad
     * and ICRC, with room to spare (the endpoint's own transmit buffer allows 192).
     */
    static final int MAX_ROCE_HEADERS_LENGTH = 192;
    /** The largest RoCE path MTU. */
    static final int MAX_PMTU = 4096;

    static final class Role
    {
        @Option(names = "--server", description = "Wait for a client, receive and check the data.")
        boolean server;

        @Option(names = "--connect", paramLabel = "HOST[:PORT]", description = "Connect to a server and send.")
        String connect;
    }

    @ArgGroup(exclusive = true, multiplicity = "1")
    Role role;

    @Option(names = "--port", description = "Bootstrap TCP port the server listens on (default ${DEFAULT-VALUE}).")
    int port = DEFAULT_PORT;

    @Option(names = "--dev", required = true, description = "Interface to open an AF_PACKET port on.")
    String dev;

    @Option(names = "--ip", description = "Local address to use (default: the interface's first IPv4 address).")
    String ip;

    @Option(names = "--size", description = "Message size in bytes (default ${DEFAULT-VALUE}).")
    int size = 65536;

    @Option(names = "--iterations", description = "Messages to send (default ${DEFAULT-VALUE}).")
    int iterations = 1000;

    @Option(names = "--pmtu", description = "Path MTU: 256..4096 (default ${DEFAULT-VALUE}).")
    int pmtu = 1024;

    @Option(names = "--drop", description = "Probability of dropping each packet this side sends (default 0).")
    double drop;

    @Option(names = "--op", description = "write or send (default ${DEFAULT-VALUE}).")
    String op = "write";

    @Option(names = "--tx-depth", description = "Messages in flight (default ${DEFAULT-VALUE}).")
    int txDepth = 16;

    @Option(names = "--window", description = "Outstanding PSN limit in packets (default ${DEFAULT-VALUE}).")
    int window = 1024;

    @Option(names = "--rto-us", description = "Initial retransmission timeout in microseconds (default ${DEFAULT-VALUE}).")
    long rtoMicros = 20000;

    @Option(names = "--rx-ring", description = "AF_PACKET receive ring: V2 hands each frame over at once, V3 " +
        "in blocks that can wait for a timer (default ${DEFAULT-VALUE}).")
    RxRingVersion rxRing = AfPacketConfiguration.DEFAULT_RX_RING_VERSION;

    @Option(names = "--rx-block-size", description = "AF_PACKET receive block bytes (default ${DEFAULT-VALUE}).")
    int rxBlockSize = AfPacketConfiguration.DEFAULT_RX_BLOCK_SIZE;

    @Option(names = "--rx-blocks", description = "AF_PACKET receive blocks (default ${DEFAULT-VALUE}).")
    int rxBlocks = AfPacketConfiguration.DEFAULT_RX_BLOCK_COUNT;

    @Option(names = "--rx-frame-size", description = "V2 receive slot bytes; 0 (default) sizes slots for the " +
        "largest RoCE frame at PMTU 4096 (the server learns the client's --pmtu only later), so on a jumbo-MTU " +
        "link the ring holds twice the frames MTU-sized slots would.")
    int rxFrameSize;

    @Option(names = "--seed", description = "Pattern and fault-injection seed (default ${DEFAULT-VALUE}).")
    long seed = 42;

    @Option(names = "--timeout", description = "Give up after this many seconds (default ${DEFAULT-VALUE}).")
    int timeoutSeconds = 300;

    private final PrintStream out = System.out;

    @Override
    public Integer call() throws Exception
    {
        final RcConfig config = new RcConfig()
            .pmtu(pmtu)
            .maxOutstandingPackets(window)
            .retransmitTimeoutNs(rtoMicros * 1000)
            .sendQueueDepth(Math.max(txDepth, 1))
            .receiveQueueDepth(Math.max(txDepth * 2, 2))
            .sendDropProbability(drop)
            .faultSeed(seed ^ (role.server ? 0x5EL : 0xC1L));
        // TX slots large enough for a 4096-byte PMTU frame.
        final AfPacketConfiguration portConfig = AfPacketConfiguration.defaults(dev)
            .withTxRing(8192, 1024)
            .withRxRingVersion(rxRing)
            .withRxRing(rxBlockSize, rxBlocks, AfPacketConfiguration.DEFAULT_RX_BLOCK_TIMEOUT_MS)
            .withRxFrameSize(rxFrameSize != 0 ? rxFrameSize :
                AfPacketConfiguration.rxFrameSizeForFrames(MAX_PMTU + MAX_ROCE_HEADERS_LENGTH))
            .withRoceOnly(true);
        try (AfPacketPort packetPort = AfPacketPort.open(portConfig))
        {
            final InetAddress localIp = ip != null ? InetAddress.getByName(ip) : interfaceAddress(dev);
            final long localMac = ConnectionInfo.macFromBytes(packetPort.macAddress());
            final RcEndpoint endpoint = new RcEndpoint(packetPort, config, SystemNanoClock.INSTANCE, localIp, localMac);
            final CompletionQueue cq = new CompletionQueue(4096);
            final QueuePair qp = endpoint.createQueuePair(cq, cq);
            final int status = role.server ? runServer(endpoint, qp, cq) : runClient(endpoint, qp, cq);
            packetPort.refreshKernelStatistics();
            final var port = packetPort.counters();
            out.printf(Locale.ROOT, "write-bw port role=%s rx_ring=%s rx_frame_size=%d rx_frames=%d rx_dropped=%d " +
                "rx_truncated=%d tx_frames=%d tx_ring_full=%d tx_errors=%d%n", role.server ? "server" : "client",
                rxRing, packetPort.rxFrameSize(), port.rxFrames(), port.rxDropped(), port.rxTruncated(),
                port.txFrames(), port.txRingFull(), port.txErrors());
            return status;
        }
    }

    private int runServer(final RcEndpoint endpoint, final QueuePair qp, final CompletionQueue cq) throws IOException
    {
        final Duration timeout = Duration.ofSeconds(timeoutSeconds);
        try (Bootstrap bootstrap = Bootstrap.listen(port, timeout))
        {
            final String paramsLine = bootstrap.readLine();
            if (paramsLine == null || !paramsLine.startsWith("test "))
            {
                System.err.println("write-bw: expected test parameters from the client, got: " + paramsLine);
                return 2;
            }
            final Map<String, String> params = parseParams(paramsLine);
            final String testOp = params.get("op");
            final int testSize = Integer.parseInt(params.get("size"));
            final int testIterations = Integer.parseInt(params.get("iterations"));
            final long testSeed = Long.parseLong(params.get("seed"));
            final long total = (long)testSize * testIterations;
            if (total > Integer.MAX_VALUE)
            {
                bootstrap.sendLine("error size*iterations exceeds 2 GiB");
                return 2;
            }
            final MemoryRegion region = endpoint.registerMemory((int)Math.max(1, total));
            final ConnectionInfo peer = bootstrap.exchange(qp.localInfo(region));
            qp.connect(peer);

            final boolean send = "send".equals(testOp);
            final int depth = Math.max(txDepth * 2, 2);
            final long[] received = new long[1];
            final long[] nextRecv = new long[1];
            final int[] failure = { -1 };
            final boolean[] done = new boolean[1];
            if (send)
            {
                while (nextRecv[0] < testIterations && nextRecv[0] < depth)
                {
                    qp.postRecv(nextRecv[0], region, (int)(nextRecv[0] * testSize), testSize);
                    nextRecv[0]++;
                }
            }
            else
            {
                qp.postRecv(0, region, 0, 0);
            }
            final long deadline = System.nanoTime() + timeout.toNanos();
            final long start = System.nanoTime();
            while (!done[0] && failure[0] < 0)
            {
                if (endpoint.doWork() == 0)
                {
                    Thread.onSpinWait();
                }
                cq.poll(c ->
                {
                    if (!c.isSuccess())
                    {
                        failure[0] = c.status();
                        return;
                    }
                    if (c.opcode() == Completion.OP_RECV_RDMA_WITH_IMM)
                    {
                        done[0] = true;
                    }
                    else if (c.opcode() == Completion.OP_RECV)
                    {
                        if (c.byteLength() != testSize)
                        {
                            failure[0] = CompletionStatus.LOCAL_LENGTH_ERROR;
                        }
                        received[0]++;
                        if (nextRecv[0] < testIterations)
                        {
                            qp.postRecv(nextRecv[0], region, (int)(nextRecv[0] * testSize), testSize);
                            nextRecv[0]++;
                        }
                        done[0] = received[0] == testIterations;
                    }
                }, 256);
                if (System.nanoTime() - deadline > 0)
                {
                    break;
                }
            }
            final double seconds = (System.nanoTime() - start) / 1e9;
            final long mismatch = done[0] ? Pattern.firstMismatch(region.buffer(), 0, (int)total, testSeed) : -2;
            final boolean ok = done[0] && failure[0] < 0 && mismatch == -1;
            final QpCounters counters = qp.counters();
            final String result = String.format(Locale.ROOT,
                "result ok=%s bytes=%d mismatch=%d status=%s duplicates=%d out_of_sequence=%d naks_sent=%d " +
                "acks_sent=%d icrc_errors=%d send_drops=%d", ok, total, mismatch,
                failure[0] < 0 ? (done[0] ? "complete" : "timeout") : CompletionStatus.name(failure[0]),
                counters.duplicates(), counters.outOfSequence(), counters.naksSent(), counters.acksSent(),
                counters.icrcErrors(), counters.sendDrops());
            out.printf(Locale.ROOT, "write-bw role=server op=%s size=%d iterations=%d bytes=%d seconds=%.3f %s%n",
                testOp, testSize, testIterations, total, seconds, result.substring("result ".length()));
            bootstrap.sendLine(result);

            // Keep answering (re-ACKing duplicates) until the client has all its completions.
            final AtomicBoolean clientDone = new AtomicBoolean();
            final Thread waiter = Thread.ofPlatform().daemon().name("write-bw-bootstrap").start(() ->
            {
                try
                {
                    bootstrap.readLine();
                }
                catch (final IOException ignored)
                {
                    // closed or reset: the client is gone either way
                }
                clientDone.set(true);
            });
            final long lingerDeadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            while (!clientDone.get() && System.nanoTime() - lingerDeadline < 0)
            {
                if (endpoint.doWork() == 0)
                {
                    Thread.onSpinWait();
                }
            }
            waiter.interrupt();
            return ok ? 0 : 1;
        }
    }

    private int runClient(final RcEndpoint endpoint, final QueuePair qp, final CompletionQueue cq) throws IOException
    {
        final boolean send;
        if ("send".equals(op))
        {
            send = true;
        }
        else if ("write".equals(op))
        {
            send = false;
        }
        else
        {
            System.err.println("write-bw: --op must be write or send: " + op);
            return 2;
        }
        final long total = (long)size * iterations;
        if (size <= 0 || iterations <= 0 || total > Integer.MAX_VALUE)
        {
            System.err.println("write-bw: need size > 0, iterations > 0 and size*iterations < 2 GiB");
            return 2;
        }
        final String host;
        final int serverPort;
        final int colon = role.connect.lastIndexOf(':');
        if (colon > 0 && role.connect.indexOf(':') == colon)
        {
            host = role.connect.substring(0, colon);
            serverPort = Integer.parseInt(role.connect.substring(colon + 1));
        }
        else
        {
            host = role.connect;
            serverPort = port;
        }
        final Duration timeout = Duration.ofSeconds(timeoutSeconds);
        try (Bootstrap bootstrap = Bootstrap.connect(host, serverPort, timeout))
        {
            bootstrap.sendLine(String.format(Locale.ROOT, "test op=%s size=%d iterations=%d seed=%d",
                send ? "send" : "write", size, iterations, seed));
            final MemoryRegion source = endpoint.registerMemory((int)total);
            Pattern.fill(source.buffer(), 0, (int)total, seed);
            final ConnectionInfo peer = bootstrap.exchange(qp.localInfo(source));
            qp.connect(peer);

            final WorkRequest wr = new WorkRequest();
            final long[] completed = new long[1];
            final int[] failure = { -1 };
            long posted = 0;
            final long start = System.nanoTime();
            final long deadline = start + timeout.toNanos();
            while (completed[0] < iterations && failure[0] < 0)
            {
                while (posted < iterations && qp.outstandingSends() < txDepth)
                {
                    final boolean last = posted == iterations - 1;
                    wr.wrId(posted).local(source, (int)(posted * size), size).immediate((int)posted);
                    if (send)
                    {
                        wr.opcode(WorkRequest.SEND);
                    }
                    else
                    {
                        wr.opcode(last ? WorkRequest.RDMA_WRITE_WITH_IMM : WorkRequest.RDMA_WRITE)
                            .remote(peer.va() + posted * size, peer.rkey());
                    }
                    if (qp.postSend(wr) != QueuePair.POST_OK)
                    {
                        break;
                    }
                    posted++;
                }
                if (endpoint.doWork() == 0)
                {
                    Thread.onSpinWait();
                }
                cq.poll(c ->
                {
                    if (c.isSuccess())
                    {
                        completed[0]++;
                    }
                    else if (failure[0] < 0)
                    {
                        failure[0] = c.status();
                    }
                }, 256);
                if (System.nanoTime() - deadline > 0)
                {
                    break;
                }
            }
            final double seconds = (System.nanoTime() - start) / 1e9;
            bootstrap.sendLine("done");
            String result;
            try
            {
                result = bootstrap.readLine(Duration.ofSeconds(120));
            }
            catch (final IOException ex)
            {
                result = "result ok=false server=" + ex.getMessage().replace(' ', '_');
            }
            final Map<String, String> serverResult = result == null ? Map.of() : parseParams(result);
            final boolean serverOk = "true".equals(serverResult.get("ok"));
            final boolean ok = failure[0] < 0 && completed[0] == iterations && serverOk;
            final QpCounters counters = qp.counters();
            out.printf(Locale.ROOT,
                "write-bw role=client op=%s size=%d iterations=%d pmtu=%d bytes=%d seconds=%.3f goodput_gbps=%.3f " +
                "packets_sent=%d retransmitted=%d timeouts=%d naks_received=%d rnr_naks_received=%d send_drops=%d " +
                "server_duplicates=%s server_naks_sent=%s status=%s check=%s%n",
                send ? "send" : "write", size, iterations, pmtu, total, seconds,
                completed[0] * (double)size * 8 / seconds / 1e9, counters.packetsSent(),
                counters.retransmittedPackets(), counters.timeouts(), counters.naksReceived(),
                counters.rnrNaksReceived(), counters.sendDrops(), serverResult.getOrDefault("duplicates", "?"),
                serverResult.getOrDefault("naks_sent", "?"),
                failure[0] < 0 ? (completed[0] == iterations ? "complete" : "timeout") :
                CompletionStatus.name(failure[0]),
                serverOk ? "OK" : "FAIL(server: " + result + ")");
            return ok ? 0 : 1;
        }
    }

    private static Map<String, String> parseParams(final String line)
    {
        final Map<String, String> map = new HashMap<>();
        for (final String token : line.trim().split("\\s+"))
        {
            final int eq = token.indexOf('=');
            if (eq > 0)
            {
                map.put(token.substring(0, eq), token.substring(eq + 1));
            }
        }
        return map;
    }

    private static InetAddress interfaceAddress(final String dev) throws SocketException
    {
        final NetworkInterface nif = AllReduceCommand.addressedInterface(dev);
        InetAddress fallback = null;
        for (final InetAddress address : nif.inetAddresses().toList())
        {
            if (address instanceof Inet4Address)
            {
                return address;
            }
            if (!address.isLinkLocalAddress() && fallback == null)
            {
                fallback = address;
            }
        }
        if (fallback == null)
        {
            throw new IllegalArgumentException(dev + " has no IP address; pass --ip");
        }
        return fallback;
    }
}

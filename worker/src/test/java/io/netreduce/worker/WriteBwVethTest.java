package io.netreduce.worker;

import io.netreduce.protocol.icrc.Icrc;
import io.netreduce.protocol.wire.RoceFrame;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * Two {@code netreduce worker write-bw} processes in two network namespaces joined by a veth pair (MTU 9000),
 * each started with {@code ip netns exec}, moving data byte-exact by RDMA WRITE and SEND over AF_PACKET ports.
 * Needs root; skipped otherwise.
 */
@Timeout(value = 15, unit = TimeUnit.MINUTES)
class WriteBwVethTest
{
    private static final String TAG = Long.toString(ProcessHandle.current().pid());
    private static final String NS_CLIENT = "nrt-rcc-" + TAG;
    private static final String NS_SERVER = "nrt-rcs-" + TAG;
    private static final String CLIENT_IP = "10.99.0.1";
    private static final String SERVER_IP = "10.99.0.2";
    private static boolean created;
    private static int nextPort = 18600;

    @BeforeAll
    static void createNamespaces() throws Exception
    {
        assumeTrue("root".equals(System.getProperty("user.name")), "needs root to create network namespaces");
        run("ip", "netns", "add", NS_CLIENT);
        created = true;
        run("ip", "netns", "add", NS_SERVER);
        run("ip", "link", "add", "nrc" + TAG, "type", "veth", "peer", "name", "nrs" + TAG);
        run("ip", "link", "set", "nrc" + TAG, "netns", NS_CLIENT);
        run("ip", "link", "set", "nrs" + TAG, "netns", NS_SERVER);
        for (final String[] side : new String[][]{ { NS_CLIENT, "nrc" + TAG, CLIENT_IP }, { NS_SERVER, "nrs" + TAG, SERVER_IP } })
        {
            run("ip", "-n", side[0], "link", "set", side[1], "name", "eth0");
            run("ip", "-n", side[0], "link", "set", "eth0", "mtu", "9000", "up");
            run("ip", "-n", side[0], "link", "set", "lo", "up");
            run("ip", "-n", side[0], "addr", "add", side[2] + "/24", "dev", "eth0");
        }
    }

    @AfterAll
    static void deleteNamespaces() throws Exception
    {
        if (created)
        {
            runQuietly("ip", "netns", "del", NS_CLIENT);
            runQuietly("ip", "netns", "del", NS_SERVER);
        }
    }

    @ParameterizedTest(name = "{0} {1} MiB pmtu {2} drop {3}")
    @CsvSource({
        "write, 256, 1024, 0",
        "write, 256, 4096, 0",
        "send,   64, 1024, 0",
        "send,   64, 4096, 0",
        "write, 256, 1024, 0.01",
        "write, 256, 4096, 0.01",
        "send,   64, 1024, 0.01",
        "send,   64, 4096, 0.01" })
    void shouldMoveDataByteExactBetweenNamespaces(final String op, final int mebibytes, final int pmtu,
        final double drop) throws Exception
    {
        final Map<String, String> client = transfer(op, mebibytes, pmtu, drop, null);

        assertThat(client.get("check")).isEqualTo("OK");
        assertThat(client.get("status")).isEqualTo("complete");
        assertThat(Long.parseLong(client.get("bytes"))).isEqualTo((long)mebibytes << 20);
        if (drop > 0)
        {
            assertThat(Long.parseLong(client.get("retransmitted"))).isGreaterThan(0);
            assertThat(Long.parseLong(client.get("send_drops"))).isGreaterThan(0);
        }
    }

    @Test
    void shouldCaptureValidRcTrafficWithMonotonicPsnsAndGoodIcrcs() throws Exception
    {
        final Path pcap = Files.createTempFile("nrt-rc-", ".pcap");
        try
        {
            final Map<String, String> client = transfer("write", 16, 1024, 0, pcap);
            assertThat(client.get("check")).isEqualTo("OK");

            // tshark dissects the slice as InfiniBand over UDP 4791; per destination QP the PSNs never go back.
            final List<String> fields = output("tshark", "-r", pcap.toString(), "-Y", "infiniband",
                "-T", "fields", "-e", "infiniband.bth.opcode", "-e", "infiniband.bth.destqp", "-e", "infiniband.bth.psn");
            assertThat(fields).hasSizeGreaterThan(1000);
            final Map<String, Long> lastPsn = new HashMap<>();
            int requests = 0;
            for (final String line : fields)
            {
                final String[] f = line.split("\t");
                final int opcode = Integer.decode(f[0]);
                final String key = f[1] + (opcode == 0x11 ? "/ack" : "/req");
                final long psn = Long.decode(f[2]);
                final Long previous = lastPsn.put(key, psn);
                if (opcode != 0x11)
                {
                    requests++;
                    if (previous != null)
                    {
                        assertThat(psn).as("request PSN after %d on %s", previous, key).isEqualTo(previous + 1);
                    }
                }
                else if (previous != null)
                {
                    assertThat(psn).as("ACK PSN on %s", key).isGreaterThanOrEqualTo(previous);
                }
            }
            assertThat(requests).isGreaterThan(1000);

            // Every ICRC verifies with our Icrc...
            final RoceFrame frame = new RoceFrame();
            final Icrc icrc = new Icrc();
            int verified = 0;
            for (final byte[] packet : readPcap(pcap))
            {
                assertThat(frame.wrap(new UnsafeBuffer(packet), 0, packet.length)).isEqualTo(RoceFrame.OK);
                assertThat(icrc.verify(frame)).isTrue();
                verified++;
            }
            assertThat(verified).isEqualTo(fields.size());


            // ...and with scapy's RoCE layer.
            final List<String> scapy = output("/usr/bin/python3", "-c", String.join("\n",
                "import sys",
                "from scapy.all import rdpcap, UDP, raw",
                "from scapy.contrib.roce import BTH",
                "bad = 0; n = 0",
                "for p in rdpcap(sys.argv[1]):",
                "    if UDP in p and p[UDP].dport == 4791:",
                "        n += 1",
                "        b = p[BTH]; r = raw(b)",
                "        if b.compute_icrc(r) != r[-4:]: bad += 1",
                "print(n, bad)"), pcap.toString());
            assertThat(scapy.getLast()).isEqualTo(verified + " 0");
        }
        finally
        {
            Files.deleteIfExists(pcap);
        }
    }

    private static Map<String, String> transfer(
        final String op, final int mebibytes, final int pmtu, final double drop, final Path capture) throws Exception
    {
        final int port = nextPort++;
        final int size = 1 << 20;
        Process tshark = null;
        if (capture != null)
        {
            tshark = new ProcessBuilder("ip", "netns", "exec", NS_SERVER, "tshark", "-q", "-i", "eth0",
                "-f", "udp port 4791", "-c", "2000", "-F", "pcap", "-w", capture.toString()).redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
            Thread.sleep(1500); // tshark needs a moment before it captures
        }
        final Process server = worker(NS_SERVER, "--server", "--dev", "eth0", "--port", Integer.toString(port),
            "--drop", Double.toString(drop), "--timeout", "600");
        final Process client = worker(NS_CLIENT, "--connect", SERVER_IP + ":" + port, "--dev", "eth0",
            "--op", op, "--size", Integer.toString(size), "--iterations", Integer.toString(mebibytes),
            "--pmtu", Integer.toString(pmtu), "--drop", Double.toString(drop), "--timeout", "600",
            // Lossless runs: an RTO well above JIT warm-up stalls, so any retransmission would be a real fault.
            "--rto-us", drop > 0 ? "20000" : "200000");
        try
        {
            assertThat(client.waitFor(10, TimeUnit.MINUTES)).as("client finished").isTrue();
            assertThat(server.waitFor(2, TimeUnit.MINUTES)).as("server finished").isTrue();
            final String clientOut = new String(client.getInputStream().readAllBytes());
            final String serverOut = new String(server.getInputStream().readAllBytes());
            System.out.println(clientOut.lines().filter(l -> l.startsWith("write-bw")).findFirst().orElse(clientOut));
            System.out.println(serverOut.lines().filter(l -> l.startsWith("write-bw")).findFirst().orElse(serverOut));
            assertThat(client.exitValue()).as("client exit; output:%n%s%nserver:%n%s", clientOut, serverOut).isZero();
            assertThat(server.exitValue()).as("server exit; output:%n%s", serverOut).isZero();
            if (tshark != null)
            {
                assertThat(tshark.waitFor(60, TimeUnit.SECONDS)).as("capture of 2000 frames finished").isTrue();
            }
            return parse(clientOut.lines().filter(l -> l.startsWith("write-bw role=client")).findFirst().orElseThrow());
        }
        finally
        {
            client.destroyForcibly();
            server.destroyForcibly();
            if (tshark != null)
            {
                tshark.destroy();
                tshark.waitFor(10, TimeUnit.SECONDS);
            }
        }
    }

    private static Process worker(final String namespace, final String... args) throws IOException
    {
        final List<String> command = new ArrayList<>(List.of("ip", "netns", "exec", namespace));
        command.addAll(javaCommand("write-bw"));
        command.addAll(Arrays.asList(args));
        return new ProcessBuilder(command).redirectErrorStream(true).start();
    }

    /** A child JVM running the netreduce worker command with this test's class path and JVM flags. */
    private static List<String> javaCommand(final String... args)
    {
        final List<String> command = new ArrayList<>(List.of(
            Path.of(System.getProperty("java.home"), "bin", "java").toString()));
        final String flags = System.getProperty("netreduce.jvm.flags", "").trim();
        if (!flags.isEmpty())
        {
            command.addAll(Arrays.asList(flags.split("\\s+")));
        }
        else
        {
            // Same flags as this JVM got from Surefire's argLine (which is netreduce.jvm.flags).
            command.addAll(java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments());
        }
        command.addAll(List.of("-cp", System.getProperty("java.class.path"), "io.netreduce.worker.WorkerCommand"));
        command.addAll(Arrays.asList(args));
        return command;
    }

    private static Map<String, String> parse(final String line)
    {
        final Map<String, String> map = new HashMap<>();
        final Matcher m = java.util.regex.Pattern.compile("(\\w+)=(\\S+)").matcher(line);
        while (m.find())
        {
            map.put(m.group(1), m.group(2));
        }
        return map;
    }

    /** Frames of a classic little-endian pcap file. */
    private static List<byte[]> readPcap(final Path path) throws IOException
    {
        final ByteBuffer buffer = ByteBuffer.wrap(Files.readAllBytes(path)).order(ByteOrder.LITTLE_ENDIAN);
        assertThat(buffer.getInt(0)).isEqualTo(0xA1B2C3D4);
        buffer.position(24);
        final List<byte[]> frames = new ArrayList<>();
        while (buffer.remaining() >= 16)
        {
            buffer.getInt();
            buffer.getInt();
            final int captured = buffer.getInt();
            final int original = buffer.getInt();
            assertThat(captured).as("snaplen must keep the ICRC").isEqualTo(original);
            final byte[] frame = new byte[captured];
            buffer.get(frame);
            frames.add(frame);
        }
        return frames;
    }

    private static List<String> output(final String... command) throws Exception
    {
        final Process process = new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.DISCARD).start();
        final List<String> lines = new String(process.getInputStream().readAllBytes()).lines().toList();
        assertThat(process.waitFor(120, TimeUnit.SECONDS)).isTrue();
        assertThat(process.exitValue()).as("%s", Arrays.toString(command)).isZero();
        return lines;
    }

    private static void run(final String... command) throws Exception
    {
        final Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
        final String out = new String(process.getInputStream().readAllBytes());
        assertThat(process.waitFor(30, TimeUnit.SECONDS)).isTrue();
        assertThat(process.exitValue()).as("%s: %s", Arrays.toString(command), out).isZero();
    }

    private static void runQuietly(final String... command) throws Exception
    {
        final Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
        process.getInputStream().readAllBytes();
        process.waitFor(30, TimeUnit.SECONDS);
    }
}

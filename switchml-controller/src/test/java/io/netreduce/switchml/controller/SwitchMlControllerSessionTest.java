package io.netreduce.switchml.controller;

import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.netreduce.switchml.controller.proto.PacketSize;
import io.netreduce.switchml.controller.proto.RdmaSessionRequest;
import io.netreduce.switchml.controller.proto.SessionGrpc;
import io.netreduce.switchml.controller.proto.UdpSessionResponse;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

@Timeout(value = 20, unit = TimeUnit.SECONDS)
class SwitchMlControllerSessionTest
{
    /** 02:77:00:00:00:01 as the published client sends it (see SwitchMlAddressesTest). */
    private static final long WORKER_MAC = 0x0277_0000_0001L;
    /** 10.0.0.1, host order. */
    private static final int WORKER_IP = 0x0A00_0001;

    private ControllerHarness harness;
    private ManagedChannel channel;
    private SessionGrpc.SessionBlockingStub stub;

    @BeforeEach
    void start() throws Exception
    {
        harness = new ControllerHarness();
        channel = NettyChannelBuilder.forAddress("127.0.0.1", harness.controller.address().getPort()).usePlaintext()
            .build();
        stub = SessionGrpc.newBlockingStub(channel);
    }

    @AfterEach
    void stop() throws Exception
    {
        channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        harness.close();
    }

    private static io.netreduce.switchml.controller.proto.UdpSessionRequest.Builder request()
    {
        return io.netreduce.switchml.controller.proto.UdpSessionRequest.newBuilder()
            .setSessionId(0x1871_0000_0000_0001L)
            .setRank(2)
            .setNumWorkers(4)
            .setMac(WORKER_MAC)
            .setIpv4(WORKER_IP)
            .setPacketSize(PacketSize.MTU_256);
    }

    @Test
    void shouldPassTheRequestsFieldsAndPeerToTheDaemonAndAnswerWithTheAppliancesAddresses()
    {
        final UdpSessionResponse response = stub.udpSession(request().build());

        assertThat(response.getSessionId()).isEqualTo(0x1871_0000_0000_0001L);
        assertThat(response.getMac()).isEqualTo(ControllerHarness.APPLIANCE.mac());
        assertThat(response.getIpv4()).isEqualTo(ControllerHarness.APPLIANCE.ipv4());

        final UdpSessionRequest seen = harness.sessions.requests().getFirst();
        assertThat(seen.sessionId()).isEqualTo(0x1871_0000_0000_0001L);
        assertThat(seen.rank()).isEqualTo(2);
        assertThat(seen.numWorkers()).isEqualTo(4);
        assertThat(seen.mac()).isEqualTo(WORKER_MAC);
        assertThat(seen.macText()).isEqualTo("02:77:00:00:00:01");
        assertThat(seen.ipv4()).isEqualTo(WORKER_IP);
        assertThat(seen.ipv4Text()).isEqualTo("10.0.0.1");
        assertThat(seen.packetSizeCode()).isEqualTo(1);
        assertThat(seen.peer()).isNotNull();
        assertThat(seen.peer().getAddress().isLoopbackAddress()).isTrue();
        assertThat(seen.peer().getPort()).isPositive().isNotEqualTo(harness.controller.address().getPort());
        assertThat(harness.controller.sessionsOpened()).isEqualTo(1);
        assertThat(harness.controller.sessionsRefused()).isZero();
    }

    @Test
    void shouldPassAnUnknownPacketSizeCodeAsReceived()
    {
        stub.udpSession(request().setPacketSizeValue(9).build());
        assertThat(harness.sessions.requests().getFirst().packetSizeCode()).isEqualTo(9);
    }

    @Test
    void shouldAnswerARefusedSessionWithZerosAsUpstreamDoesAndCountIt()
    {
        harness.sessions.refuseRank = 2;
        final UdpSessionResponse response = stub.udpSession(request().build());

        assertThat(response.getSessionId()).isZero();
        assertThat(response.getMac()).isZero();
        assertThat(response.getIpv4()).isZero();
        assertThat(harness.controller.sessionsRefused()).isEqualTo(1);
        assertThat(harness.controller.sessionsOpened()).isZero();
    }

    @Test
    void shouldLetTheJavaClientSeeTheRefusalWithItsReason()
    {
        harness.sessions.refuseRank = 1;
        final SwitchMlControllerClient client = harness.client();

        assertThatThrownBy(() -> client.udpSession(77, 1, 2, WORKER_MAC, WORKER_IP, 0))
            .isInstanceOf(UncheckedSessionRefusedException.class)
            .hasMessageContaining("refused session 77 for rank 1: rank 1 is not a member of job 7")
            .hasCauseInstanceOf(SessionRefusedException.class);
        assertThat(client.udpSession(77, 0, 2, WORKER_MAC, WORKER_IP, 0)).isEqualTo(ControllerHarness.APPLIANCE);
    }

    @Test
    void shouldRefuseAMalformedSessionRequestWithInvalidArgument()
    {
        assertThatThrownBy(() -> stub.udpSession(request().setRank(4).build()))
            .isInstanceOf(StatusRuntimeException.class)
            .hasMessageContaining("INVALID_ARGUMENT")
            .hasMessageContaining("rank 4 is not below num_workers 4");
        assertThatThrownBy(() -> stub.udpSession(request().setNumWorkers(65).build()))
            .hasMessageContaining("num_workers must be 1 to 64, not 65");
        assertThatThrownBy(() -> stub.udpSession(request().setSessionId(0).build()))
            .hasMessageContaining("session_id 0");
        assertThatThrownBy(() -> stub.udpSession(request().setMac(1L << 48).build()))
            .hasMessageContaining("has bits above the low 48");
        assertThat(harness.sessions.requests()).isEmpty();
        assertThat(harness.controller.sessionsRefused()).isEqualTo(4);
    }

    @Test
    void shouldAnswerRdmaSessionsUnimplemented()
    {
        assertThatThrownBy(() -> stub.rdmaSession(RdmaSessionRequest.newBuilder()
            .setSessionId(5).setRank(0).setNumWorkers(2).setMac(WORKER_MAC).setIpv4(WORKER_IP)
            .addQpns(0x11).addPsns(0).build()))
            .isInstanceOf(StatusRuntimeException.class)
            .satisfies(e -> assertThat(((StatusRuntimeException)e).getStatus().getCode())
                .isEqualTo(Status.Code.UNIMPLEMENTED))
            .hasMessageContaining("this appliance speaks SwitchML over UDP only; use the DPDK backend");
        assertThat(harness.sessions.requests()).isEmpty();
    }

    @Test
    void shouldOpenRankZerosSessionBeforeAnyOtherRanksWhenFourWorkersRegister() throws Exception
    {
        harness.sessions.rankZeroDelayMillis = 150;
        final List<Future<UdpSessionReply>> workers = new ArrayList<>();
        for (int rank = 3; rank >= 0; rank--)
        {
            final int r = rank;
            final SwitchMlControllerClient client = harness.client();
            workers.add(harness.async(() -> client.register(r, 4, WORKER_MAC + r, WORKER_IP + r, 1)));
        }
        for (final Future<UdpSessionReply> worker : workers)
        {
            assertThat(worker.get(10, TimeUnit.SECONDS)).isEqualTo(ControllerHarness.APPLIANCE);
        }

        final List<UdpSessionRequest> opened = harness.sessions.requests();
        assertThat(opened).hasSize(4);
        assertThat(opened.getFirst().rank()).isZero();
        assertThat(opened).extracting(UdpSessionRequest::rank).containsExactlyInAnyOrder(0, 1, 2, 3);
        final long sessionId = opened.getFirst().sessionId();
        assertThat(sessionId).isNotZero();
        assertThat(opened).allSatisfy(request ->
        {
            assertThat(request.sessionId()).isEqualTo(sessionId);
            assertThat(request.numWorkers()).isEqualTo(4);
            assertThat(request.mac()).isEqualTo(WORKER_MAC + request.rank());
            assertThat(request.ipv4()).isEqualTo(WORKER_IP + request.rank());
            assertThat(request.packetSizeCode()).isEqualTo(1);
        });
        assertThat(harness.controller.broadcastsCompleted()).isEqualTo(1);
        assertThat(harness.controller.barriersCompleted()).isEqualTo(2);
        assertThat(harness.controller.sessionsOpened()).isEqualTo(4);
    }

    @Test
    void shouldFinishTheRegistrationBarriersBeforeThrowingARefusal() throws Exception
    {
        harness.sessions.refuseRank = 0;
        final List<Future<UdpSessionReply>> workers = new ArrayList<>();
        for (int rank = 0; rank < 2; rank++)
        {
            final int r = rank;
            final SwitchMlControllerClient client = harness.client();
            workers.add(harness.async(() -> client.register(r, 2, WORKER_MAC, WORKER_IP, 0)));
        }
        assertThat(workers.get(1).get(10, TimeUnit.SECONDS)).isEqualTo(ControllerHarness.APPLIANCE);
        assertThatThrownBy(() -> workers.get(0).get(10, TimeUnit.SECONDS))
            .hasCauseInstanceOf(UncheckedSessionRefusedException.class)
            .hasMessageContaining("not a member of job 7");
        assertThat(harness.controller.barriersCompleted()).isEqualTo(2);
    }

    @Test
    void shouldReportTheActualPortAndRefuseAnAddressInUse() throws Exception
    {
        final InetSocketAddress bound = harness.controller.address();
        assertThat(bound.getPort()).isPositive();
        assertThat(bound.getAddress().getHostAddress()).isEqualTo("127.0.0.1");

        try (ServerSocket taken = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress()))
        {
            final InetSocketAddress busy = new InetSocketAddress("127.0.0.1", taken.getLocalPort());
            assertThatThrownBy(() -> SwitchMlController.start(busy, harness.sessions))
                .isInstanceOf(java.io.IOException.class)
                .hasMessageContaining("cannot listen on");
        }
    }
}

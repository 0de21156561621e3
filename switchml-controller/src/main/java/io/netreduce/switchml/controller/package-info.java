/**
 * The SwitchML controller's gRPC service ({@code switchml_proto.Session} and {@code switchml_proto.Sync}, the
 * interface of p4app-switchML's controller), so that the published SwitchML client library registers with this
 * appliance, and a client of it for our own Java worker. The daemon plugs in what opening a session means
 * ({@link io.netreduce.switchml.controller.UdpSessions}); barrier and broadcast are answered here. The generated
 * protocol classes are in {@code io.netreduce.switchml.controller.proto}; the {@code .proto} is in
 * {@code src/main/proto}. Logs under {@code io.netreduce.switchml.controller}.
 */
package io.netreduce.switchml.controller;

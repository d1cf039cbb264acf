"""The seeder's producer settings: the input must hold each id once, or every run would judge
the seeder instead of the pipeline."""

from eoschaos.workloads.harness.seeder import seeder_producer_config


def test_the_idempotent_seeder_keeps_one_request_in_flight_per_broker():
    config = seeder_producer_config("127.0.0.1:9092", non_idempotent=False)
    assert config["enable.idempotence"] is True
    assert config["max.in.flight.requests.per.connection"] == 1


def test_the_non_idempotent_seeder_pipelines_requests_so_a_timed_out_one_can_land_twice():
    config = seeder_producer_config("127.0.0.1:9092", non_idempotent=True)
    assert config["enable.idempotence"] is False
    assert config["max.in.flight.requests.per.connection"] == 5

package example.orders;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

/**
 * What the pipeline does to one order, apart from Kafka: an order with a positive amount is
 * enriched with its amount in units, its tax and the shop it came from; any other record is
 * rejected as it came, with the reason, for the dead-letter topic.
 *
 * <p>An order: {"order_id": 17, "customer": "customer-3", "amount_cents": 1250}. Enriched:
 * {"order_id": 17, "customer": "customer-3", "shop": "web-orders", "amount": 12.5, "tax": 2.5}.
 */
final class Orders {

  static final double TAX_RATE = 0.2;
  private static final ObjectMapper JSON = new ObjectMapper();

  /** An order on its way out: accepted (enriched) or rejected (for the dead-letter topic). */
  record Routed(boolean accepted, String json) {}

  private Orders() {}

  /** Routes one input value read from `shop`'s topic. */
  static Routed route(String value, String shop) {
    JsonNode order;
    try {
      order = JSON.readTree(value == null ? "" : value);
    } catch (JsonProcessingException e) {
      return rejected(JSON.createObjectNode().put("raw", value), "not JSON");
    }
    if (!(order instanceof ObjectNode placed)) {
      return rejected(JSON.createObjectNode().put("raw", value), "not a JSON object");
    }
    JsonNode cents = placed.get("amount_cents");
    if (cents == null || !cents.canConvertToLong() || cents.asLong() <= 0) {
      return rejected(placed, "no positive amount_cents");
    }
    double amount = cents.asLong() / 100.0;
    ObjectNode enriched = JSON.createObjectNode();
    enriched.set("order_id", placed.get("order_id"));
    enriched.set("customer", placed.get("customer"));
    enriched.put("shop", shop);
    enriched.put("amount", amount);
    enriched.put("tax", Math.round(amount * TAX_RATE * 100) / 100.0);
    return new Routed(true, enriched.toString());
  }

  private static Routed rejected(ObjectNode record, String reason) {
    return new Routed(false, record.put("rejected_because", reason).toString());
  }
}

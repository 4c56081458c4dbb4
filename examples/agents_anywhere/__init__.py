"""An agent that runs anywhere asks people through the gateway: the request API over plain HTTP (`rest_api`), the
Python client (`client_agent`), and a callback receiver that checks Standard Webhooks signatures
(`callback_receiver`). tests/test_examples_anywhere.py runs each of them against a gateway."""

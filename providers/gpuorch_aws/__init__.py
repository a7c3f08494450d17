"""The ``aws`` provider: EC2 spot and on-demand GPU instances and EBS volumes (docs/aws.md).

Registered as entry point ``aws`` in group ``gpuorch.providers``; boto3 is imported only when
the provider is built.
"""

from .provider import AwsProvider

__all__ = ["AwsProvider"]

"""Which AMI a region launches, and its root device: configured, or the newest Deep Learning AMI."""

from __future__ import annotations

from typing import Any, NamedTuple

from gpuorch.errors import NotFoundError, PermanentError, UserInputError

from .calls import Ec2


class Image(NamedTuple):
    id: str
    root_device: str  # where the root volume's size and type are set at launch


def newest(images: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The most recently created available x86_64 image (DLAMI names carry a date; creation time is simpler)."""
    ok = [i for i in images
          if i.get("State", "available") == "available" and i.get("Architecture", "x86_64") == "x86_64"]
    return max(ok, key=lambda i: str(i.get("CreationDate", "")), default=None)


def resolve_image(ec2: Ec2, region: str, ami: str | None, name_filter: str) -> Image:
    """The configured ``ami`` (checked to exist in ``region``), else the newest Amazon-owned
    image matching ``name_filter``. Raises UserInputError naming the option to set."""
    if ami:
        try:
            found = ec2.call(region, "describe_images", ImageIds=[ami]).get("Images", [])
        except (NotFoundError, PermanentError) as e:  # InvalidAMIID.NotFound / .Malformed
            if e.code and e.code.startswith("InvalidAMIID"):
                found = []
            else:
                raise
        if not found:
            raise UserInputError(f"providers.aws.ami.{region}: {ami} does not exist in {region} (AMI ids are per "
                                 "region); give an AMI id from that region, or drop the entry to use the Deep "
                                 "Learning AMI")
        image = found[0]
    else:
        filters = [{"Name": "name", "Values": [name_filter]}, {"Name": "state", "Values": ["available"]}]
        images = ec2.pages(region, "describe_images", "Images", Owners=["amazon"], Filters=filters)
        image = newest(images)
        if image is None:
            raise UserInputError(f"providers.aws.ami.{region}: no Amazon AMI named like {name_filter!r} in {region}; "
                                 f"set providers.aws.ami.{region} to an AMI id (or providers.aws.ami_name)")
    return Image(image["ImageId"], image.get("RootDeviceName") or "/dev/sda1")
